"""Masked language modelling (MLM): which tokens BERT must predict, and what it sees there.

Introduced in the pretraining-data notebook. Devlin et al. 2019, section 3.1: "we mask
15% of all WordPiece tokens in each sequence at random ... If the i-th token is chosen,
we replace the i-th token with (1) the [MASK] token 80% of the time (2) a random token
10% of the time (3) the unchanged i-th token 10% of the time."

    >>> masked, labels = mask_tokens(input_ids, special_tokens_mask,
    ...                              mask_token_id=tok.mask_token_id, vocab_size=tok.vocab_size,
    ...                              special_ids=tok.special_ids, generator=g)

Shapes: `B` batch, `T` tokens, `V` vocabulary.

Choices made here (all tested in tests/test_masking.py):

- **Selection** `"bernoulli"` (the default): every eligible token is selected on its own
  with probability p, as Hugging Face's `DataCollatorForLanguageModeling` and RoBERTa's
  dynamic masking do. The expected rate is exactly p for every token whatever the sequence
  length, and a padded batch is masked with a few tensor operations. `"exact"` is the
  original BERT: exactly `int(n * p + 0.5)` tokens per sequence (round half up, as
  Python 2's `round` did; at least 1, at most `max_predictions_per_seq`). The original
  counted n with [CLS] and [SEP] included; here n counts only the eligible tokens, so the
  two can differ by one prediction. With `"exact"` every sequence has at least one label;
  with `"bernoulli"` a very short sequence can have none (an all -100 batch gives a NaN
  MLM loss, which only happens with tiny toy batches).
- **Eligible** tokens are those with `special_tokens_mask == 0`: [CLS], [SEP] and padding
  are marked 1 and are never selected. [UNK] is an ordinary token (the original masks it too).
- **Random replacements** are drawn uniformly from the ids that are *not* special.
  The forbidden ids are `special_ids` ∪ {`mask_token_id`} ∪ every id found at a special
  position of this batch. Pass `special_ids=tokenizer.special_ids` so that [UNK] is never
  drawn either (the uncased vocabulary has [PAD]=0 [UNK]=100 [CLS]=101 [SEP]=102
  [MASK]=103; a vocabulary trained with `train_wordpiece` has them at 0..4).
- **Whole-word masking** (`word_ids` given): words, not pieces, are selected, and every
  piece of a selected word is labelled. The 80/10/10 decision is made once per word by
  default (`per_word_decision=True`), so a word is either all [MASK], all random pieces,
  or all kept: half-masked words such as `[MASK] ##able` would hint at the answer.
  Google's whole-word-masking release of create_pretraining_data.py (and Hugging Face's
  `DataCollatorForWholeWordMask`) select whole words but decide 80/10/10 per piece;
  `per_word_decision=False` does that.
- **Randomness** comes only from `generator` (torch's global generator when None), and
  the draws do not depend on which tokens get selected: the same generator state and the
  same input give the same output, which is what makes a resumed training run exact.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import torch

from ..model.constants import IGNORE_INDEX
SELECTIONS = ("bernoulli", "exact")
# Tokens that can never belong to a word that masking may pick.
NON_WORD_TOKENS = ("[CLS]", "[SEP]", "[PAD]", "[MASK]")


def mask_tokens(
    input_ids: torch.Tensor,
    special_tokens_mask: torch.Tensor,
    *,
    mask_token_id: int,
    vocab_size: int,
    mlm_probability: float = 0.15,
    generator: torch.Generator | None = None,
    special_ids: Iterable[int] | None = None,
    word_ids: torch.Tensor | Sequence[Sequence[int | None]] | None = None,
    selection: str = "bernoulli",
    max_predictions_per_seq: int | None = None,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
    per_word_decision: bool = True,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Choose MLM targets and corrupt the input: BERT's 15% and 80/10/10 rule.

    Introduced in the pretraining-data notebook. A pure function: inputs stay unchanged.

    Args:
        input_ids: (B, T) or (T,) LongTensor of token ids.
        special_tokens_mask: same shape; 1 (or True) on [CLS], [SEP] and padding, which are
            never selected; 0 on ordinary tokens.
        mask_token_id: the id of [MASK].
        vocab_size: V; random replacements are drawn from 0..V-1 minus the special ids.
        mlm_probability: p, the fraction of eligible tokens (or words) selected.
        generator: the torch.Generator for every random draw (global RNG when None).
        special_ids: ids never drawn as random replacements, in addition to
            `mask_token_id` and the ids at special positions of this batch. Pass
            `tokenizer.special_ids` (then [UNK] is excluded too).
        word_ids: (B, T) or (T,) word index of each token for whole-word masking; tokens of
            one word share an index, words of a row are numbered 0, 1, 2, ... (any numbers
            in 0..T-1 do); -1 (or None) on special tokens. See `wordpiece_word_ids` and
            `segmented_word_ids`.
        selection: "bernoulli" (each token or word on its own with probability p) or
            "exact" (int(n * p + 0.5) tokens per sequence, at least 1, as the original BERT).
        max_predictions_per_seq: with "exact", the most selected tokens per sequence
            (20 for 128-token sequences in the original).
        mask_replace_prob, random_replace_prob: the 80% and 10% of the rule; the rest
            (10%) of the selected tokens stay unchanged.
        per_word_decision: with `word_ids`, decide 80/10/10 once per word (True) or per piece (False, Google's).

    Returns:
        masked_input_ids: like `input_ids`, with the selected tokens replaced.
        labels: like `input_ids`; the original id at selected positions, -100 elsewhere.
    """
    input_ids, special_tokens_mask = _check_inputs(input_ids, special_tokens_mask, vocab_size, mask_token_id)
    _check_probabilities(mlm_probability, mask_replace_prob, random_replace_prob)
    _check_selection(selection, max_predictions_per_seq)
    one_row = input_ids.dim() == 1
    input_ids, eligible, word_ids, forbidden = _batched(input_ids, special_tokens_mask, word_ids, mask_token_id,
                                                        special_ids, vocab_size)
    u_select, u_action, pick = _draws(input_ids.shape, vocab_size - len(forbidden), generator, input_ids.device)
    selected = _select(u_select, eligible, word_ids, selection, mlm_probability, max_predictions_per_seq)  # (B, T)
    if word_ids is not None and per_word_decision:
        u_action = u_action.gather(1, word_ids.clamp(min=0))  # (B, T) one decision per word, read by its pieces
    masked, labels = _corrupt(input_ids, selected, u_action, pick, forbidden,
                              mask_token_id, mask_replace_prob, random_replace_prob)
    return (masked[0], labels[0]) if one_row else (masked, labels)


def _batched(input_ids: torch.Tensor, special_tokens_mask: torch.Tensor, word_ids, mask_token_id: int,
             special_ids: Iterable[int] | None, vocab_size: int):
    """(B, T) views of one row or a batch: input_ids, the eligible tokens (bool), word_ids (or None), and the
    sorted ids never drawn as random replacements."""
    if input_ids.dim() == 1:
        input_ids, special_tokens_mask = input_ids[None], special_tokens_mask[None]  # (1, T)
    eligible = ~special_tokens_mask.bool()  # (B, T) tokens that may be selected
    if word_ids is not None:
        word_ids = _as_word_ids(word_ids, tuple(input_ids.shape), eligible, input_ids.device)  # (B, T)
    forbidden = _forbidden_ids(input_ids, eligible, mask_token_id, special_ids, vocab_size)  # (S,) sorted
    return input_ids, eligible, word_ids, forbidden


def _draws(shape, n_choices: int, generator: torch.Generator | None, device: torch.device):
    """Every random number of one call, drawn up front with fixed shapes, so that the generator advances
    the same way whatever gets selected: u_select and u_action, uniform (B, T), and pick (B, T) in
    0..n_choices-1 (an index among the allowed replacement ids)."""
    draw_device = generator.device if generator is not None else device
    u_select = torch.rand(*shape, generator=generator, device=draw_device)
    u_action = torch.rand(*shape, generator=generator, device=draw_device)
    pick = torch.randint(n_choices, tuple(shape), generator=generator, device=draw_device)
    return u_select.to(device), u_action.to(device), pick.to(device)


def _select(
    u: torch.Tensor, eligible: torch.Tensor, word_ids: torch.Tensor | None, selection: str, p: float, cap: int | None
) -> torch.Tensor:
    """Which tokens the MLM must predict: (B, T) bool, never an ineligible one.

    u (B, T): uniform draws. With word_ids, u[b, w] is the draw of word w of row b, and
    every piece of a word reads its word's draw, so the pieces of a word are selected together.
    """
    if selection == "bernoulli":
        if word_ids is not None:
            u = u.gather(1, word_ids.clamp(min=0))  # (B, T); specials read index 0 but are never eligible
        # Each eligible token (or word) is selected with probability p, independently.
        return eligible & (u < p)  # (B, T)
    if word_ids is None:
        return _exact_tokens(u, eligible, p, cap)
    return _exact_words(u, eligible, word_ids, p, cap)


def _corrupt(
    input_ids: torch.Tensor,
    selected: torch.Tensor,
    u_action: torch.Tensor,
    pick: torch.Tensor,
    forbidden: torch.Tensor,
    mask_token_id: int,
    mask_replace_prob: float = 0.8,
    random_replace_prob: float = 0.1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT's 80/10/10 rule on the selected tokens -> (masked_input_ids, labels), both (B, T).

    u_action (B, T): uniform draws that decide each selected token's fate; pick (B, T): the
    index, among the ids not in `forbidden` (sorted), of a random replacement.
    """
    # 80% of selected tokens become [MASK]
    to_mask = selected & (u_action < mask_replace_prob)  # (B, T)
    # 10% of selected tokens become a random non-special token
    to_random = selected & (u_action >= mask_replace_prob) & (u_action < mask_replace_prob + random_replace_prob)
    # the other 10% of selected tokens stay unchanged (but are still predicted)
    masked = input_ids.clone()
    masked[to_mask] = mask_token_id
    masked[to_random] = _nth_allowed_id(pick[to_random], forbidden)
    # Labels: the original id where selected, -100 (ignored by the loss) everywhere else.
    labels = torch.where(selected, input_ids, torch.full_like(input_ids, IGNORE_INDEX))  # (B, T)
    return masked, labels


def _forbidden_ids(input_ids, eligible, mask_token_id: int, special_ids, vocab_size: int) -> torch.Tensor:
    """The ids a random replacement may never take, sorted: [MASK], the ids found at this
    batch's special positions ([CLS]/[SEP]/[PAD] as they occur) and `special_ids`."""
    device = input_ids.device
    forbidden = [torch.tensor([mask_token_id], device=device), input_ids[~eligible]]
    if special_ids is not None:
        forbidden.append(torch.as_tensor(list(special_ids), dtype=torch.long, device=device))
    forbidden = torch.cat(forbidden).unique()  # (S,) sorted
    if forbidden.min() < 0 or forbidden.max() >= vocab_size:
        raise ValueError(f"special_ids must be ids in 0..{vocab_size - 1}, got {forbidden.tolist()}.")
    if vocab_size == len(forbidden):
        raise ValueError("Every id of the vocabulary is special: there is no token to draw as a random replacement.")
    return forbidden


def _nth_allowed_id(n: torch.Tensor, forbidden: torch.Tensor) -> torch.Tensor:
    """The n-th (from 0) id that is not in `forbidden` (sorted), for every n: (M,) -> (M,).

    Counting the allowed ids 0, 1, 2, ... skips each forbidden id; the forbidden id f_j
    (the j-th, from 0) has f_j - j allowed ids below it, so the n-th allowed id is n plus
    the number of forbidden ids with f_j - j <= n. (No V-sized table is built: this runs
    once per sample in the data loader.)
    """
    allowed_below = forbidden - torch.arange(len(forbidden), device=forbidden.device)  # (S,)
    return n + torch.searchsorted(allowed_below, n, right=True)


def _exact_tokens(u: torch.Tensor, eligible: torch.Tensor, p: float, cap: int | None) -> torch.Tensor:
    """Select exactly k = int(n * p + 0.5) (>= 1, <= cap) eligible tokens per row: (B, T) bool."""
    k = _exact_counts(eligible.sum(1), p, cap)  # (B,)
    # The k eligible tokens with the smallest draws: a uniformly random k-subset.
    keys = torch.where(eligible, u, torch.full_like(u, 2.0))  # (B, T) non-eligible sort last
    ranks = keys.argsort(dim=1).argsort(dim=1)  # (B, T) rank of each token's key in its row
    return eligible & (ranks < k[:, None])


def _exact_words(
    u_word: torch.Tensor, eligible: torch.Tensor, word_ids: torch.Tensor, p: float, cap: int | None
) -> torch.Tensor:
    """Whole words in random order until k pieces are labelled, as the original does.

    `u_word[b, w]` is the random key of word w of row b. A word that would take the count
    past k is skipped (a shorter word may still fit), so a row can end with fewer than k.
    """
    k = _exact_counts(eligible.sum(1), p, cap).tolist()  # (B,)
    selected = torch.zeros_like(eligible)
    for b in range(u_word.shape[0]):
        words = word_ids[b][eligible[b]]  # (n,) word index of each eligible piece
        if words.numel() == 0:
            continue
        ids, sizes = words.unique(return_counts=True)  # (W,), (W,)
        order = u_word[b, ids].argsort().tolist()  # the words in a random order
        ids, sizes = ids.tolist(), sizes.tolist()
        chosen, total = [], 0
        for w in order:
            if total >= k[b]:
                break
            if total + sizes[w] > k[b]:
                continue  # this word does not fit: try a shorter one
            chosen.append(ids[w])
            total += sizes[w]
        if chosen:
            chosen_ids = torch.tensor(chosen, dtype=word_ids.dtype, device=word_ids.device)
            selected[b] = eligible[b] & torch.isin(word_ids[b], chosen_ids)
    return selected


def _exact_counts(n: torch.Tensor, p: float, cap: int | None) -> torch.Tensor:
    """int(n * p + 0.5), at least 1 and at most cap (and never more than n): (B,)."""
    k = torch.floor(n.double() * p + 0.5).long().clamp(min=1)
    if cap is not None:
        k = k.clamp(max=cap)
    return torch.minimum(k, n)


def _check_inputs(input_ids, special_tokens_mask, vocab_size: int, mask_token_id: int):
    if not isinstance(input_ids, torch.Tensor):
        input_ids = torch.as_tensor(input_ids, dtype=torch.long)
    if not isinstance(special_tokens_mask, torch.Tensor):
        special_tokens_mask = torch.as_tensor(special_tokens_mask)
    if input_ids.dtype != torch.long:
        raise TypeError(f"input_ids must be a LongTensor (token ids), got dtype {input_ids.dtype}.")
    if input_ids.dim() not in (1, 2):
        raise ValueError(f"input_ids must have shape (B, T) or (T,), got {tuple(input_ids.shape)}.")
    if special_tokens_mask.shape != input_ids.shape:
        raise ValueError(
            f"special_tokens_mask has shape {tuple(special_tokens_mask.shape)} but input_ids has "
            f"{tuple(input_ids.shape)}: they must match (1 on [CLS]/[SEP]/[PAD], 0 elsewhere)."
        )
    if special_tokens_mask.device != input_ids.device:
        special_tokens_mask = special_tokens_mask.to(input_ids.device)
    if not 0 <= mask_token_id < vocab_size:
        raise ValueError(f"mask_token_id={mask_token_id} is outside the vocabulary 0..{vocab_size - 1}.")
    if input_ids.numel() and (input_ids.min() < 0 or input_ids.max() >= vocab_size):
        raise ValueError(
            f"input_ids hold ids in {int(input_ids.min())}..{int(input_ids.max())}, outside the "
            f"vocabulary 0..{vocab_size - 1}. Pass the vocab_size of the tokenizer that made them."
        )
    return input_ids, special_tokens_mask


def _check_selection(selection: str, max_predictions_per_seq: int | None) -> None:
    if selection not in SELECTIONS:
        raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}.")
    if max_predictions_per_seq is not None and selection != "exact":
        raise ValueError(
            "max_predictions_per_seq caps the per-sequence count of selection='exact'; "
            "'bernoulli' has no count to cap. Pass selection='exact' or drop the cap."
        )


def _check_probabilities(p: float, mask_replace_prob: float, random_replace_prob: float) -> None:
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"mlm_probability must be in [0, 1], got {p}.")
    if mask_replace_prob < 0 or random_replace_prob < 0 or mask_replace_prob + random_replace_prob > 1:
        raise ValueError(
            "mask_replace_prob and random_replace_prob must be >= 0 and sum to at most 1 "
            f"(the rest stay unchanged), got {mask_replace_prob} and {random_replace_prob}."
        )


def _as_word_ids(word_ids, shape: tuple[int, int], eligible: torch.Tensor, device) -> torch.Tensor:
    """word_ids as a (B, T) LongTensor, checked: -1 on specials, 0..T-1 on eligible tokens."""
    if not isinstance(word_ids, torch.Tensor):
        rows = [word_ids] if word_ids and not isinstance(word_ids[0], (list, tuple)) else word_ids
        word_ids = torch.tensor([[-1 if w is None else w for w in row] for row in rows], dtype=torch.long)
    word_ids = word_ids.to(device=device, dtype=torch.long)
    if word_ids.dim() == 1:
        word_ids = word_ids[None]  # (1, T)
    if tuple(word_ids.shape) != shape:
        raise ValueError(f"word_ids has shape {tuple(word_ids.shape)}, input_ids {shape}: they must match.")
    real = word_ids[eligible]
    if real.numel() and (real.min() < 0 or real.max() >= shape[1]):
        raise ValueError(
            "word_ids must number the words of each row 0, 1, 2, ... (values in 0..T-1) on every "
            "non-special token; use -1 only on [CLS]/[SEP]/[PAD]. wordpiece_word_ids() makes them."
        )
    return word_ids


# ----------------------------------------------------------------------------------------
# Word ids for whole-word masking
# ----------------------------------------------------------------------------------------


def wordpiece_word_ids(tokens: Sequence[str], non_word_tokens: Sequence[str] = NON_WORD_TOKENS) -> list[int]:
    """The word index of each WordPiece token: a piece starting with `##` continues a word.

    [CLS], [SEP], [PAD] and [MASK] get -1. Words are numbered 0, 1, 2, ... across the whole
    sequence (both segments). A `##` piece with no word before it (after a special token,
    or at the start) starts a word of its own.

        >>> wordpiece_word_ids(["[CLS]", "una", "##ff", "##able", "cafe", "[SEP]"])
        [-1, 0, 0, 0, 1, -1]
    """
    word_ids, current, inside_word = [], -1, False
    for token in tokens:
        if token in non_word_tokens:
            word_ids.append(-1)
            inside_word = False
            continue
        if not (token.startswith("##") and inside_word):
            current += 1  # a new word begins
        word_ids.append(current)
        inside_word = True
    return word_ids


def segmented_word_ids(
    words: Sequence[str], tokenize: Callable[[str], list[str]] | None = None
) -> tuple[list[str], list[int]]:
    """Tokens and word ids of a sentence whose words are given (Chinese word segmentation).

    Chinese is written without spaces and BERT's tokenizer cuts it into single characters,
    so the words must come from the corpus's own segmentation (People's Daily marks them).
    Every token of one word shares its word id. With `tokenize=None` each character is a
    token; pass `tokenizer.tokenize` to cut each word exactly as the model's tokenizer
    does (digits and Latin letters inside Chinese text become word pieces).

        >>> segmented_word_ids(["中国", "人民", "银行"])
        (['中', '国', '人', '民', '银', '行'], [0, 0, 1, 1, 2, 2])
    """
    if isinstance(words, str):
        raise TypeError("segmented_word_ids() takes a list of words, e.g. ['中国', '人民'], not one string.")
    tokens: list[str] = []
    word_ids: list[int] = []
    word = 0
    for text in words:
        pieces = list(text.strip()) if tokenize is None else tokenize(text)
        pieces = [p for p in pieces if not p.isspace()]
        if not pieces:
            continue  # a word of only spaces or punctuation the tokenizer drops
        tokens += pieces
        word_ids += [word] * len(pieces)
        word += 1
    return tokens, word_ids
