"""Fine-tuning heads: BERT on the four classic downstream task families.

Introduced in the fine-tuning notebooks. Devlin et al. 2019, section 4: "For each task,
we simply plug in the task-specific inputs and outputs into BERT and fine-tune all the
parameters end-to-end." Each head is one small layer on top of `BertModel`:

    BertForSequenceClassification   pooled [CLS] (B, D) -> dropout -> linear -> (B, C)
                                     single sentences, or pairs told apart by token_type_ids
    BertForTokenClassification      every token (B, T, D) -> dropout -> linear -> (B, T, C)
                                     one label per word: its first piece carries it
    BertForQuestionAnswering        every token (B, T, D) -> linear -> (B, T, 2):
                                     start and end logits of the answer span

Shapes: B batch, T tokens, D hidden, C classes (labels). Labels use -100 for "no label
here", the ignore index of `torch.nn.functional.cross_entropy`.

Also here: mapping word labels to pieces and back (`encode_words`, `align_word_labels`,
`word_predictions`), span decoding (`top_spans`, `best_span`), the sliding window that
lets QA read contexts longer than the model (`qa_features`, `decode_qa`), and the
feature-based alternative to fine-tuning (`mean_pool`, `freeze_encoder`).
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .encoder import BertModel, init_bert_weights
from .heads import IGNORE_INDEX, BertForPreTraining

# ----------------------------------------------------------------------------------------
# Outputs
# ----------------------------------------------------------------------------------------


@dataclass
class SequenceClassifierOutput:
    logits: torch.Tensor  # (B, C); (B, 1) for regression
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class TokenClassifierOutput:
    logits: torch.Tensor  # (B, T, C)
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class QuestionAnsweringOutput:
    start_logits: torch.Tensor  # (B, T)
    end_logits: torch.Tensor  # (B, T)
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None


# ----------------------------------------------------------------------------------------
# Pooling and freezing (feature-based use)
# ----------------------------------------------------------------------------------------


def mean_pool(last_hidden_state: torch.Tensor, attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The average of the real tokens' vectors, as sentence-BERT pools: (B, T, D) -> (B, D).

    attention_mask (B, T): 1 = real token, 0 = padding. Padding is left out of both the
    sum and the count, so a sentence's vector does not depend on how much it was padded.
    """
    if attention_mask is None:
        return last_hidden_state.mean(dim=1)  # (B, D)
    mask = attention_mask.unsqueeze(-1).to(last_hidden_state.dtype)  # (B, T, 1)
    summed = (last_hidden_state * mask).sum(dim=1)  # (B, D)
    count = mask.sum(dim=1).clamp(min=1e-9)  # (B, 1); an all-padding row gives 0, not NaN
    return summed / count


def freeze_encoder(model: "BertTaskModel", frozen: bool = True) -> int:
    """Stop (or restart) training the encoder of a task model; returns its parameter count.

    Frozen, the encoder is a fixed feature extractor (the "feature-based approach" of
    Devlin et al., section 5.3): its weights get no gradients, it runs under
    `torch.no_grad()` (no activations kept for backward, so it is cheaper), and it stays
    in eval mode (no dropout) even when `model.train()` is called. Only the head learns.
    """
    if not isinstance(model, BertTaskModel):
        raise TypeError(
            f"freeze_encoder takes a bertedu task model (e.g. BertForSequenceClassification), got {type(model).__name__}"
        )
    for p in model.bert.parameters():
        p.requires_grad_(not frozen)
    model.encoder_frozen = frozen
    model.train(model.training)  # re-apply the eval/train rule to the encoder
    return sum(p.numel() for p in model.bert.parameters())


# ----------------------------------------------------------------------------------------
# The task models
# ----------------------------------------------------------------------------------------


class BertTaskModel(nn.Module):
    """What every head shares: a `BertModel` in `.bert`, built fresh or taken from a
    pretrained encoder (`from_encoder`), and the frozen-encoder switch."""

    def __init__(self, config: BertConfig, encoder: Optional[BertModel] = None):
        super().__init__()
        if encoder is not None and encoder.config != config:
            raise ValueError(
                "the encoder's config differs from the config given; build with from_encoder(encoder, ...)"
            )
        self.config = config
        self.bert = encoder if encoder is not None else BertModel(config)
        self.encoder_frozen = False

    @classmethod
    def from_encoder(cls, encoder: Union[BertModel, BertForPreTraining], **kwargs):
        """Put this head on a pretrained encoder (its weights are used, not copied).

        `encoder`: a `BertModel` (e.g. `bertedu.interop.load_minilm()`) or a
        `BertForPreTraining`, whose `.bert` is taken and MLM/NSP heads dropped.
        The new head is randomly initialised on the encoder's device and dtype, and the
        model is left in train mode, ready to fine-tune.
        """
        if isinstance(encoder, BertForPreTraining):
            encoder = encoder.bert
        if not isinstance(encoder, BertModel):
            raise TypeError(
                f"from_encoder takes a bertedu BertModel or BertForPreTraining, got {type(encoder).__name__}"
            )
        model = cls(encoder.config, encoder=encoder, **kwargs)
        first = next(encoder.parameters())
        return model.to(device=first.device, dtype=first.dtype).train()

    def _init_head(self, *modules: nn.Module) -> None:
        for module in modules:
            module.apply(lambda m: init_bert_weights(m, self.config.initializer_range))

    def train(self, mode: bool = True):
        super().train(mode)
        if self.encoder_frozen:
            self.bert.eval()  # a frozen feature extractor has no dropout
        return self

    def encode(self, input_ids, token_type_ids=None, attention_mask=None, **flags):
        """Run the encoder (without gradients when it is frozen)."""
        with torch.set_grad_enabled(torch.is_grad_enabled() and not self.encoder_frozen):
            return self.bert(input_ids, token_type_ids, attention_mask, **flags)

    def num_parameters(self, trainable_only: bool = False) -> int:
        return sum(p.numel() for p in self.parameters() if p.requires_grad or not trainable_only)


POOLINGS = ("pooler", "mean")


class BertForSequenceClassification(BertTaskModel):
    """A label (or a score) for a sentence or a sentence pair. Introduced in the
    sentence classification notebooks.

    A pair is encoded as `[CLS] A [SEP] B [SEP]` with token_type_ids 0 on A and 1 on B;
    every layer attends across both, and the head reads one vector for the whole input.

    pooling="pooler": BERT's choice, tanh(dense(h_[CLS])) (`BertModel.pooler_output`).
    pooling="mean":   the mean of the real tokens' last hidden states (`mean_pool`),
                      sentence-BERT's choice; works for encoders without a pooler.
    num_labels=1 makes it a regressor (STS-B similarity scores): MSE loss on float labels.

    forward(input_ids (B, T), token_type_ids (B, T) = None, attention_mask (B, T) = None,
            labels (B,) = None, *, output_hidden_states=False, output_attentions=False)
        -> SequenceClassifierOutput(logits (B, C), loss)
    """

    def __init__(
        self,
        config: BertConfig,
        num_labels: int = 2,
        classifier_dropout: Optional[float] = None,
        pooling: str = "pooler",
        *,
        encoder: Optional[BertModel] = None,
    ):
        super().__init__(config, encoder)
        if num_labels < 1:
            raise ValueError(f"num_labels must be at least 1 (1 = regression), got {num_labels}")
        if pooling not in POOLINGS:
            raise ValueError(f"unknown pooling {pooling!r}; choose one of {POOLINGS}")
        if pooling == "pooler" and self.bert.pooler is None:
            raise ValueError("this encoder has no pooler (tanh(dense([CLS]))); use pooling='mean'")
        self.num_labels = num_labels
        self.pooling = pooling
        p = config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self._init_head(self.classifier)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> SequenceClassifierOutput:
        out = self.encode(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        if self.pooling == "pooler":
            pooled = out.pooler_output  # (B, D)
        else:
            pooled = mean_pool(out.last_hidden_state, attention_mask)  # (B, D)
        logits = self.classifier(self.dropout(pooled))  # (B, C)
        loss = None
        if labels is not None:
            if self.num_labels == 1:  # regression: the single logit is the score
                loss = F.mse_loss(logits.squeeze(-1).float(), labels.float())
            else:
                loss = F.cross_entropy(logits.float(), labels.long())
        return SequenceClassifierOutput(logits, loss, out.hidden_states, out.attentions)


class BertForTokenClassification(BertTaskModel):
    """A label per token (NER, POS tagging). Introduced in the token tagging notebook.

    Words are cut into pieces; only each word's first piece carries its label, the other
    pieces and the specials have label -100 and are left out of the loss
    (`align_word_labels`), and a word's prediction is its first piece's
    (`word_predictions`).

    forward(input_ids (B, T), token_type_ids=None, attention_mask=None, labels (B, T) = None,
            *, output_hidden_states=False, output_attentions=False)
        -> TokenClassifierOutput(logits (B, T, C), loss)
    """

    def __init__(
        self,
        config: BertConfig,
        num_labels: int,
        classifier_dropout: Optional[float] = None,
        *,
        encoder: Optional[BertModel] = None,
    ):
        super().__init__(config, encoder)
        if num_labels < 2:
            raise ValueError(f"token classification needs at least 2 labels, got {num_labels}")
        self.num_labels = num_labels
        p = config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(config.hidden_size, num_labels)
        self._init_head(self.classifier)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TokenClassifierOutput:
        out = self.encode(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, C)
        loss = None
        if labels is not None:
            if attention_mask is not None:
                labels = labels.masked_fill(attention_mask == 0, IGNORE_INDEX)  # padding never counts
            loss = _masked_cross_entropy(logits.flatten(0, 1), labels.flatten())
        return TokenClassifierOutput(logits, loss, out.hidden_states, out.attentions)


def _masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over labelled positions; 0 (not NaN) when none is labelled,
    as happens when truncation cuts away every labelled word of a batch."""
    if (labels != IGNORE_INDEX).any():
        return F.cross_entropy(logits.float(), labels.long(), ignore_index=IGNORE_INDEX)
    return logits.sum() * 0.0  # keeps the graph, so backward() still works


class BertForQuestionAnswering(BertTaskModel):
    """Extractive QA: where does the answer start and end? Introduced in the QA notebook.

    Input: `[CLS] question [SEP] context [SEP]` (`qa_features`). One linear layer D -> 2
    gives every token a start logit and an end logit; the answer is the best valid span
    (`best_span`), mapped back to the context's characters (`decode_qa`).

    Training targets: start_positions and end_positions (B,), token indices. A window
    that does not contain the answer is trained to point at [CLS] (position 0), as the
    original BERT does. Positions outside the sequence (>= T, or negative) are ignored by
    the loss, as Hugging Face does (clamped to T, the ignore index).
    loss = (cross-entropy of start + cross-entropy of end) / 2.

    forward(input_ids (B, T), token_type_ids=None, attention_mask=None,
            start_positions (B,) = None, end_positions (B,) = None, *, output_...)
        -> QuestionAnsweringOutput(start_logits (B, T), end_logits (B, T), loss)
    """

    def __init__(self, config: BertConfig, *, encoder: Optional[BertModel] = None):
        super().__init__(config, encoder)
        self.qa_outputs = nn.Linear(config.hidden_size, 2)
        self._init_head(self.qa_outputs)

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        start_positions: Optional[torch.Tensor] = None,
        end_positions: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> QuestionAnsweringOutput:
        out = self.encode(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        logits = self.qa_outputs(out.last_hidden_state)  # (B, T, 2)
        start_logits, end_logits = logits.unbind(dim=-1)  # (B, T) each
        loss = None
        if (start_positions is None) != (end_positions is None):
            raise ValueError("pass both start_positions and end_positions (or neither)")
        if start_positions is not None:
            T = start_logits.shape[1]

            def position_loss(logits_: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
                # A position outside 0..T-1 gives no signal (Hugging Face clamps it to T
                # and ignores T; here it simply becomes the ignore index).
                positions = positions.long()
                outside = (positions < 0) | (positions >= T)
                return _masked_cross_entropy(logits_, positions.masked_fill(outside, IGNORE_INDEX))

            loss = (position_loss(start_logits, start_positions) + position_loss(end_logits, end_positions)) / 2
        return QuestionAnsweringOutput(start_logits, end_logits, loss, out.hidden_states, out.attentions)


# ----------------------------------------------------------------------------------------
# Token classification: word labels <-> piece labels
# ----------------------------------------------------------------------------------------


@dataclass
class WordEncoding:
    """A sentence given as words, encoded `[CLS] pieces [SEP]`, with each piece's word.

    word_ids[t] is the index of the word that token t comes from; None for [CLS], [SEP]
    and padding. All lists have length T.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    attention_mask: list[int]
    tokens: list[str]
    word_ids: list[Optional[int]]

    def __len__(self) -> int:
        return len(self.input_ids)


def encode_words(
    tokenizer, words: Sequence[str], max_length: Optional[int] = None, pad_to: Optional[int] = None
) -> WordEncoding:
    """Encode pre-split words (CoNLL rows, or Chinese characters) and remember which
    word each piece came from.

    Each word is tokenised on its own (BERT splits on whitespace first, so this gives
    the pieces the whole sentence would). A word that tokenises to nothing (a lone
    control character or combining mark) becomes [UNK], so every word keeps a token and
    a label. With `max_length`, pieces past max_length - 2 are cut (their words lose
    their tokens: see `word_predictions(..., num_words=...)`).
    """
    if isinstance(words, str):
        raise TypeError("encode_words takes a list of words; for raw text use tokenizer.encode")
    pieces_per_word = tokenizer.tokenize_batch(list(words)) if words else []
    pieces: list[str] = []
    word_ids: list[Optional[int]] = [None]  # [CLS]
    for i, word_pieces in enumerate(pieces_per_word):
        word_pieces = word_pieces or [tokenizer.unk_token]
        pieces.extend(word_pieces)
        word_ids.extend([i] * len(word_pieces))
    if max_length is None and len(pieces) + 2 > tokenizer.model_max_length:
        raise ValueError(
            f"these words make {len(pieces) + 2} tokens, more than model_max_length="
            f"{tokenizer.model_max_length}; pass max_length to cut them"
        )
    if max_length is not None:
        if max_length < 2:
            raise ValueError(f"max_length={max_length} cannot hold [CLS] and [SEP]")
        pieces, word_ids = pieces[: max_length - 2], word_ids[: max_length - 1]
    word_ids.append(None)  # [SEP]
    enc = tokenizer.encode_tokens(pieces, None, truncation=False, pad_to=pad_to)
    word_ids += [None] * (len(enc) - len(word_ids))  # padding
    return WordEncoding(enc.input_ids, enc.token_type_ids, enc.attention_mask, enc.tokens, word_ids)


def align_word_labels(word_ids: Sequence[Optional[int]], word_labels: Sequence[int]) -> list[int]:
    """Word labels -> one label per token: the first piece of each word carries the word's
    label; the word's other pieces, [CLS], [SEP] and padding get -100 (ignored by the loss).

    With bert-base-uncased's vocabulary, "unaffable" -> una ##ffa ##ble: "una" gets the
    label, "##ffa" and "##ble" get -100 (BERT section 5.3: "we use the representation of
    the first sub-token as the input to the token-level classifier").
    """
    labels = []
    previous = None
    for w in word_ids:
        if w is None or w == previous:
            labels.append(IGNORE_INDEX)  # special token, or a continuation piece
        else:
            if w >= len(word_labels):
                raise ValueError(f"word_ids refer to word {w}, but only {len(word_labels)} labels were given")
            label = word_labels[w]
            if isinstance(label, str):
                raise TypeError(f"labels must be integer ids, got the tag {label!r}; map tags to ids first")
            labels.append(int(label))
        previous = w
    return labels


def word_predictions(
    token_logits_or_preds, word_ids: Sequence[Optional[int]], num_words: Optional[int] = None, fill=None
) -> list:
    """Token predictions -> word predictions: each word takes its first piece's prediction.

    token_logits_or_preds: logits (T, C) (argmax is taken) or predicted ids (T,), for one
    sequence; T may exceed len(word_ids) (extra positions are padding).
    num_words: the sentence's length in words; words with no token (cut by truncation)
    get `fill`. Default: as many words as word_ids mention.
    """
    preds = token_logits_or_preds
    if not isinstance(preds, (torch.Tensor, list, tuple)):
        preds = torch.as_tensor(preds)  # e.g. a NumPy array
    if isinstance(preds, torch.Tensor) and preds.is_floating_point():
        if preds.dim() != 2:
            raise ValueError(f"logits must be (T, C) for one sequence, got shape {tuple(preds.shape)}")
        preds = preds.argmax(dim=-1)  # (T,)
    if hasattr(preds, "tolist"):
        preds = preds.tolist()
    if len(preds) < len(word_ids):
        raise ValueError(f"{len(preds)} token predictions for {len(word_ids)} tokens")
    seen = [w for w in word_ids if w is not None]
    if num_words is None:
        num_words = max(seen) + 1 if seen else 0
    out = [fill] * num_words
    done = set()
    for t, w in enumerate(word_ids):
        if w is not None and w not in done and w < num_words:
            out[w] = preds[t]  # the first piece speaks for the word
            done.add(w)
    return out


# ----------------------------------------------------------------------------------------
# Extractive QA: span decoding
# ----------------------------------------------------------------------------------------


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
    i = torch.arange(T)
    length = i[None, :] - i[:, None] + 1  # (T, T): end - start + 1
    valid = (length >= 1) & (length <= max_answer_length)  # start <= end, not too long
    if context_mask is not None:
        ctx = torch.as_tensor(context_mask, dtype=torch.bool).cpu()
        valid &= ctx[:, None] & ctx[None, :]  # both ends inside the context
    if start_mask is not None:
        valid &= torch.as_tensor(start_mask, dtype=torch.bool).cpu()[:, None]
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


# ----------------------------------------------------------------------------------------
# Extractive QA: character offsets and the sliding window
# ----------------------------------------------------------------------------------------

_backends: "weakref.WeakKeyDictionary" = weakref.WeakKeyDictionary()


def tokenize_with_offsets(tokenizer, text: str) -> tuple[list[str], list[tuple[int, int]]]:
    """Word pieces of `text` and each piece's (start, end) character span in `text`.

    bertedu's tokenizers have no offset API, so this uses the `tokenizers` backend (the
    fast implementation's, or one built over the same vocabulary), whose normaliser keeps
    an alignment from the lower-cased, accent-stripped text back to the original: for
    "Zoë" the piece "zoe" has offsets (0, 3) and text[0:3] == "Zoë".
    """
    backend = getattr(tokenizer, "backend", None)
    if backend is None:
        backend = _backends.get(tokenizer)
        if backend is None:
            from .tokenizer import build_backend

            backend = build_backend(tokenizer.vocab, tokenizer.lowercase, tokenizer.chinese_chars)
            if not tokenizer.split_special_tokens:
                backend.add_special_tokens(list(tokenizer.special_tokens))  # as FastTokenizer does
            _backends[tokenizer] = backend
    enc = backend.encode(text, add_special_tokens=False)
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
        answer_tokens = (inside[0], inside[-1])

    starts = _window_starts(len(ctx_tokens), window_len, doc_stride)
    spans = [(a, min(a + window_len, len(ctx_tokens))) for a in starts]  # [a, b) in context tokens

    # BERT's "max context" rule: a token in several windows belongs to the one where it
    # has the most context on its shorter side (min of left and right), with a small
    # bonus for longer windows; the first such window on a tie.
    owner = [0] * len(ctx_tokens)
    best_score = [float("-inf")] * len(ctx_tokens)
    for w, (a, b) in enumerate(spans):
        for t in range(a, b):
            score = min(t - a, b - 1 - t) + 0.01 * (b - a)
            if score > best_score[t]:
                owner[t], best_score[t] = w, score

    features = []
    offset = len(query) + 2  # context token t sits at position t - a + offset
    for w, (a, b) in enumerate(spans):
        tokens = [tokenizer.cls_token, *query, tokenizer.sep_token, *ctx_tokens[a:b], tokenizer.sep_token]
        token_type_ids = [0] * offset + [1] * (b - a + 1)
        offsets: list[Optional[tuple[int, int]]] = [None] * offset + list(ctx_offsets[a:b]) + [None]
        max_context = [False] * offset + [owner[t] == w for t in range(a, b)] + [False]
        start_position = end_position = None
        if answer_tokens is not None:
            first, last = answer_tokens
            if a <= first and last < b:
                start_position, end_position = first - a + offset, last - a + offset
            else:
                start_position = end_position = 0  # not (wholly) in this window: point at [CLS]
        features.append(QAFeature(
            input_ids=tokenizer.convert_tokens_to_ids(tokens),
            token_type_ids=token_type_ids,
            attention_mask=[1] * len(tokens),
            tokens=tokens,
            offsets=offsets,
            max_context=max_context,
            window=w,
            start_position=start_position,
            end_position=end_position,
        ))
    return features


def collate_qa(features: Sequence[QAFeature], pad_token_id: int = 0) -> dict[str, torch.Tensor]:
    """A batch for `BertForQuestionAnswering`: LongTensors (B, T) padded to the longest
    window, plus start_positions / end_positions (B,) when the features have answers."""
    T = max(len(f) for f in features)
    pad = lambda xs, v: xs + [v] * (T - len(xs))  # noqa: E731
    batch = {
        "input_ids": torch.tensor([pad(f.input_ids, pad_token_id) for f in features]),  # (B, T)
        "token_type_ids": torch.tensor([pad(f.token_type_ids, 0) for f in features]),  # (B, T)
        "attention_mask": torch.tensor([pad(f.attention_mask, 0) for f in features]),  # (B, T); padding unseen
    }
    if all(f.start_position is not None for f in features):
        batch["start_positions"] = torch.tensor([f.start_position for f in features])  # (B,)
        batch["end_positions"] = torch.tensor([f.end_position for f in features])  # (B,)
    return batch


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
    original's ("Café Müller", not "cafe muller").
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
    start_char, end_char = f.offsets[start][0], f.offsets[end][1]
    return QAPrediction(context[start_char:end_char], start_char, end_char, score, f.window)
