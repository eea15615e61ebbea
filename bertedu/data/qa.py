"""Extractive QA data: questions and contexts into windows, logits back into answers.

Introduced in the QA notebook. A context longer than the model is cut into overlapping
windows, each `[CLS] question [SEP] context piece [SEP]` (`qa_features`); a batch of
windows goes through `BertForQuestionAnswering` (`collate_qa`); the best span over all
windows (`top_spans`, `best_span`, `decode_qa`) is cut out of the original context by
its tokens' character offsets (`tokenize_with_offsets`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional

import torch

from .tokenizer import tokenizer_backend
from .padding import pad_rows

# ----------------------------------------------------------------------------------------
# Character offsets and the sliding window
# ----------------------------------------------------------------------------------------


def tokenize_with_offsets(tokenizer, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Word pieces of `text` and each piece's (start, end) character span in `text`.

    bertedu's tokenizers have no offset API, so this uses the `tokenizers` backend (the
    fast implementation's, or one built over the same vocabulary), whose normaliser keeps
    an alignment from the lower-cased, accent-stripped text back to the original: for
    "Zoë" the piece "zoe" has offsets (0, 3) and text[0:3] == "Zoë".
    """
    enc = tokenizer_backend(tokenizer).encode(text, add_special_tokens=False)
    return list(enc.tokens), [tuple(o) for o in enc.offsets]


@dataclass
class QAFeature:
    """One window: `[CLS] question [SEP] context piece [SEP]`, all lists of length T.

    offsets[t]: the (start, end) characters of context token t in the original context,
    None for question and special tokens (so `offsets[t] is not None` is the context mask).
    max_context[t]: True where this window is context token t's "max context" window:
    of all windows holding t, the one where t has the most context on its shorter side
    (the first one on a tie). Only those tokens may start an answer here, so a token
    shared by two windows is judged where it is best understood (BERT's run_squad rule).
    start_position / end_position: the answer's first and last token in this window, or
    0 and 0 ([CLS]) when the answer is not wholly inside it; None without an answer.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    offsets: list[Optional[tuple[int, int]]]
    max_context: list[bool]
    window: int  # this window's index
    start_position: Optional[int] = None
    end_position: Optional[int] = None
    context_mask: list[bool] = field(init=False)

    def __post_init__(self) -> None:
        self.context_mask = [o is not None for o in self.offsets]

    def __len__(self) -> int:
        return len(self.input_ids)


def _window_starts(n_context: int, window_len: int, doc_stride: int) -> list[int]:
    """Where each window begins, stepping by doc_stride until the context's end is in."""
    starts = [0]
    while starts[-1] + window_len < n_context:
        starts.append(starts[-1] + min(window_len, doc_stride))
    return starts


def qa_features(
    tokenizer,
    question: str,
    context: str,
    max_seq_length: int = 384,
    doc_stride: int = 128,
    max_query_length: int = 64,
    answer_start: Optional[int] = None,
    answer_text: Optional[str] = None,
) -> list[QAFeature]:
    """Cut (question, context) into windows that each fit the model. Introduced in the
    QA notebook.

    Each window is `[CLS] question [SEP] context[a:b] [SEP]` with token_type_ids 0 on the
    question part and 1 on the context part. The question keeps its first
    max_query_length pieces. Windows hold as much context as fits and begin every
    `doc_stride` context tokens (the original BERT's meaning of doc_stride: the step
    between windows; consecutive windows overlap when the step is shorter than a
    window), so every context token appears in at least one window.

    For training, give the answer as SQuAD does (answer_start, a character index into
    context, and answer_text); each window then gets start/end token positions
    (see `QAFeature`).
    """
    if (answer_start is None) != (answer_text is None):
        raise ValueError("give both answer_start and answer_text (or neither)")
    if doc_stride < 1:
        raise ValueError(f"doc_stride must be at least 1, got {doc_stride}")
    query = tokenizer.tokenize(question)[:max_query_length]
    ctx_tokens, ctx_offsets = tokenize_with_offsets(tokenizer, context)
    if not ctx_tokens:
        raise ValueError("the context has no tokens: nothing to find an answer in")
    window_len = max_seq_length - len(query) - 3  # room left after [CLS] q [SEP] ... [SEP]
    if window_len < 1:
        raise ValueError(
            f"max_seq_length={max_seq_length} leaves no room for context after a "
            f"{len(query)}-token question; raise max_seq_length or lower max_query_length"
        )
    answer_tokens = None
    if answer_start is not None:
        answer_tokens = _answer_tokens(context, ctx_offsets, answer_start, answer_text)

    starts = _window_starts(len(ctx_tokens), window_len, doc_stride)
    spans = [(a, min(a + window_len, len(ctx_tokens))) for a in starts]  # [a, b) in context tokens
    owner = _max_context_windows(spans, len(ctx_tokens))
    head = [tokenizer.cls_token, *query, tokenizer.sep_token]
    return [_window_feature(tokenizer, head, ctx_tokens[a:b], ctx_offsets[a:b], [owner[t] == w for t in range(a, b)],
                            w, _window_answer(answer_tokens, a, b, len(head)))
            for w, (a, b) in enumerate(spans)]


def _window_feature(tokenizer, head: list[str], ctx_tokens: list[str], ctx_offsets: list, owned: list[bool],
                    window: int, answer: tuple[Optional[int], Optional[int]]) -> QAFeature:
    """One window, `head` ([CLS] question [SEP]) + its context tokens + [SEP]; `owned`: where the
    window has the token's most context; `answer`: its start and end positions (or None)."""
    tokens = head + ctx_tokens + [tokenizer.sep_token]
    return QAFeature(
        input_ids=tokenizer.convert_tokens_to_ids(tokens),
        token_type_ids=[0] * len(head) + [1] * (len(ctx_tokens) + 1),
        attention_mask=[1] * len(tokens),
        tokens=tokens,
        offsets=[None] * len(head) + list(ctx_offsets) + [None],
        max_context=[False] * len(head) + owned + [False],
        window=window,
        start_position=answer[0],
        end_position=answer[1],
    )


def _answer_tokens(context: str, ctx_offsets, answer_start: int, answer_text: str) -> tuple[int, int]:
    """The first and last context token of a SQuAD answer (a character span of context)."""
    answer_end = answer_start + len(answer_text)  # exclusive
    if context[answer_start:answer_end] != answer_text:
        raise ValueError(
            f"answer_text {answer_text!r} is not context[{answer_start}:{answer_end}] "
            f"({context[answer_start:answer_end]!r}); check answer_start"
        )
    # The answer's tokens: every context token that overlaps its characters.
    inside = [t for t, (a, b) in enumerate(ctx_offsets) if a < answer_end and b > answer_start]
    if not inside:
        raise ValueError(f"answer_text {answer_text!r} covers no token (only spaces?)")
    return inside[0], inside[-1]


def _max_context_windows(spans: Sequence[tuple[int, int]], n_context: int) -> list[int]:
    """For each context token, the window it belongs to, by BERT's "max context" rule: a
    token in several windows belongs to the one where it has the most context on its
    shorter side (min of left and right), with a small bonus for longer windows; the
    first such window on a tie."""
    owner = [0] * n_context
    best_score = [float("-inf")] * n_context
    for w, (a, b) in enumerate(spans):
        for t in range(a, b):
            score = min(t - a, b - 1 - t) + 0.01 * (b - a)
            if score > best_score[t]:
                owner[t], best_score[t] = w, score
    return owner


def _window_answer(answer_tokens: Optional[tuple[int, int]], a: int, b: int, offset: int):
    """The answer's (start, end) positions in the window holding context tokens [a, b),
    whose context begins at position `offset`; (0, 0), [CLS], when the answer is not
    wholly inside it; (None, None) without an answer."""
    if answer_tokens is None:
        return None, None
    first, last = answer_tokens
    if a <= first and last < b:
        return first - a + offset, last - a + offset
    return 0, 0  # not (wholly) in this window: point at [CLS]


def collate_qa(features: Sequence[QAFeature], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """A batch for `BertForQuestionAnswering`: LongTensors (B, T) padded to the longest
    window, plus start_positions / end_positions (B,) when the features have answers."""
    batch = {
        "input_ids": pad_rows([f.input_ids for f in features], pad_token_id),  # (B, T)
        "token_type_ids": pad_rows([f.token_type_ids for f in features], 0),  # (B, T)
        "attention_mask": pad_rows([f.attention_mask for f in features], 0),  # (B, T); padding unseen
    }
    if all(f.start_position is not None for f in features):
        batch["start_positions"] = torch.tensor([f.start_position for f in features])  # (B,)
        batch["end_positions"] = torch.tensor([f.end_position for f in features])  # (B,)
    return batch


# ----------------------------------------------------------------------------------------
# Span decoding
# ----------------------------------------------------------------------------------------


def invalid_spans(
    T: int,
    max_answer_length: int,
    context_mask: Optional[torch.Tensor] = None,
    start_mask: Optional[torch.Tensor] = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Why a span (start i, end j) of a T-token sequence cannot be an answer, as three
    (T, T) bool tables: backwards (j < i), too_long (j - i + 1 > max_answer_length) and
    outside (an end outside context_mask (T,), or a start outside start_mask (T,))."""
    i = torch.arange(T)
    length = i[None, :] - i[:, None] + 1  # (T, T): end - start + 1
    outside = torch.zeros(T, T, dtype=torch.bool)
    if context_mask is not None:
        ctx = torch.as_tensor(context_mask, dtype=torch.bool).cpu()
        outside |= ~(ctx[:, None] & ctx[None, :])  # both ends must be inside the context
    if start_mask is not None:
        outside |= ~torch.as_tensor(start_mask, dtype=torch.bool).cpu()[:, None]
    return length < 1, length > max_answer_length, outside


def top_spans(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    max_answer_length: int = 30,
    context_mask: Optional[torch.Tensor] = None,
    n_best: int = 20,
    start_mask: Optional[torch.Tensor] = None,
) -> list[tuple[int, int, float]]:
    """The `n_best` best valid spans of one sequence, best first: [(start, end, score)].

    start_logits, end_logits (T,); score = start_logit + end_logit (log-probabilities up
    to a constant). A span is valid when start <= end, end - start + 1 <= max_answer_length,
    and both ends are context tokens (context_mask (T,) true; default: every token), so
    the question, [CLS], [SEP] and padding can never be answers. start_mask (T,) further
    limits where a span may start (decode_qa uses it for the sliding window).

    Every valid pair is scored (a (T, T) table, cheap at T = 384), so the best span is
    exact rather than searched among the top-20 starts and ends as the original code did.
    """
    if start_logits.dim() != 1 or start_logits.shape != end_logits.shape:
        raise ValueError(
            f"start_logits and end_logits must be (T,) for one sequence, got {tuple(start_logits.shape)} "
            f"and {tuple(end_logits.shape)}; decode a batch row by row"
        )
    if max_answer_length < 1:
        raise ValueError(f"max_answer_length must be at least 1, got {max_answer_length}")
    T = start_logits.shape[0]
    s, e = start_logits.detach().float().cpu(), end_logits.detach().float().cpu()
    scores = s[:, None] + e[None, :]  # (T, T): scores[i, j] = start at i, end at j
    backwards, too_long, outside = invalid_spans(T, max_answer_length, context_mask, start_mask)
    valid = ~(backwards | too_long | outside)  # (T, T)
    scores = scores.masked_fill(~valid, float("-inf"))
    k = min(n_best, int(valid.sum()))
    if k == 0:
        return []
    best, flat = scores.flatten().topk(k)
    return [(int(f) // T, int(f) % T, float(v)) for v, f in zip(best, flat)]


def best_span(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    max_answer_length: int = 30,
    context_mask: Optional[torch.Tensor] = None,
) -> tuple[int, int, float]:
    """The best valid span of one sequence: (start, end, score), end inclusive.

    See `top_spans` for the rules. Raises ValueError when no span is valid (an empty
    context_mask).
    """
    spans = top_spans(start_logits, end_logits, max_answer_length, context_mask, n_best=1)
    if not spans:
        raise ValueError("no valid answer span: context_mask selects no token")
    return spans[0]



@dataclass
class QAPrediction:
    text: str  # context[start_char:end_char]
    start_char: int
    end_char: int  # exclusive
    score: float  # start_logit + end_logit
    window: int  # which window it came from


def decode_qa(
    start_logits,
    end_logits,
    features: Sequence[QAFeature],
    context: str,
    max_answer_length: int = 30,
) -> QAPrediction:
    """The best answer across a context's windows, as text of the original context.

    start_logits, end_logits: one (T_w,) row per window (a list, or a (W, T) tensor whose
    rows may be padded past each window's length). In each window a span must lie in
    the context and start at a token for which that window is the max-context one; the
    best score (start_logit + end_logit) over all windows wins. Its tokens' character
    offsets cut the answer out of `context`, so case, accents and spacing are the
    original's ("Café Müller", not "cafe muller"); a span that starts or ends inside a word
    is widened to the whole word first (`whole_words`).
    """
    if len(start_logits) != len(features) or len(end_logits) != len(features):
        raise ValueError(f"{len(features)} windows but {len(start_logits)} start / {len(end_logits)} end logit rows")
    best = None
    for f, s, e in zip(features, start_logits, end_logits):
        T = len(f)
        s, e = torch.as_tensor(s)[:T], torch.as_tensor(e)[:T]  # drop batch padding
        spans = top_spans(s, e, max_answer_length, torch.tensor(f.context_mask), 1, torch.tensor(f.max_context))
        if spans and (best is None or spans[0][2] > best[2]):
            best = (*spans[0], f)
    if best is None:
        raise ValueError("no window has a valid answer span")
    start, end, score, f = best
    start, end = whole_words(f.tokens, f.context_mask, start, end)
    start_char, end_char = f.offsets[start][0], f.offsets[end][1]
    return QAPrediction(context[start_char:end_char], start_char, end_char, score, f.window)


def whole_words(tokens: Sequence[str], context_mask: Sequence[bool], start: int, end: int) -> tuple[int, int]:
    """The span (start, end) of `tokens` widened to whole words: a start on a continuation piece
    (`##...`) moves back to its word's first piece, an end before one moves on to its word's last.

    The model scores pieces, so its best span can begin or end inside a word ("Huxley" is
    `hu ##xley`; a span starting on `##xley` would answer "xley"). An answer is words, so
    decoding widens the span, within the window's context (`context_mask`), to the words it
    touches. BERT's run_squad.py also maps the pieces to their whitespace words
    (`tok_to_orig_index`), then projects the piece text back into them, which keeps "xley".
    """
    while start > 0 and tokens[start].startswith("##") and context_mask[start - 1]:
        start -= 1
    while end + 1 < len(tokens) and context_mask[end + 1] and tokens[end + 1].startswith("##"):
        end += 1
    return start, end
