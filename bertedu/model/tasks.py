"""Fine-tuning heads: BERT on the four classic downstream task families.

Introduced in the fine-tuning notebooks. Devlin et al. 2019, section 4: "For each task,
we simply plug in the task-specific inputs and outputs into BERT and fine-tune all the
parameters end-to-end." Each head is one small layer on top of `BertModel`:

    BertForSequenceClassification   pooled [CLS] (B, D) -> dropout -> linear -> (B, C)
                                     single sentences, or pairs told apart by token_type_ids
    BertForTokenClassification      every token (B, T, D) -> dropout -> linear -> (B, T, C)
                                     one label per word: its first piece carries it;
                                     head="crf": a linear-chain CRF over the words' logits
    BertForQuestionAnswering        every token (B, T, D) -> linear -> (B, T, 2):
                                     start and end logits of the answer span

Shapes: B batch, T tokens, D hidden, C classes (labels). Labels use -100 for "no label
here", the ignore index of `torch.nn.functional.cross_entropy`.

Also here: the feature-based alternative to fine-tuning (`mean_pool`, `freeze_encoder`).
The data side lives with the data code: word labels to pieces and back in
`bertedu.data.tagging`, the QA sliding window and span decoding in `bertedu.data.qa`.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Optional, Union

import torch
import torch.nn.functional as F
from torch import nn

from .attention import MultiHeadSelfAttention
from .config import BertConfig
from .constants import IGNORE_INDEX
from .crf import LinearChainCRF, pack_positions, unpack_positions
from .encoder import BertModel, init_bert_weights
from .heads import BertForPreTraining
from .outputs import QuestionAnsweringOutput, SequenceClassifierOutput, TokenClassifierOutput

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


def set_dropout(model: nn.Module, p: float) -> None:
    """Set every dropout rate of a bertedu model to `p`: the embeddings' and each layer's
    hidden dropout, the attention probabilities' dropout, and a task head's dropout before
    its classifier. The `.config` of the model and of its parts is replaced to match
    (`hidden_dropout_prob` and `attention_probs_dropout_prob` = p), so a saved model records
    the rate it was trained with. Dropout acts in training mode only; p = 0 turns it off,
    which also makes a training step cheaper (no random masks: notebook 11's fine-tune
    takes 18% less time, benchmarks/RESULTS.md, "Notebook 11's CPU recipe")."""
    if not 0 <= p < 1:
        raise ValueError(f"a dropout rate is in [0, 1), got {p}")
    for module in model.modules():
        if isinstance(module, nn.Dropout):
            module.p = p
        if isinstance(module, MultiHeadSelfAttention):
            module.dropout_p = p
        config = getattr(module, "config", None)
        if isinstance(config, BertConfig):
            module.config = dataclasses.replace(config, hidden_dropout_prob=p, attention_probs_dropout_prob=p)


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

    def _add_classifier(self, num_labels: int, classifier_dropout: Optional[float]) -> None:
        """The classification head: dropout (the encoder's rate unless given), then D -> num_labels."""
        p = self.config.hidden_dropout_prob if classifier_dropout is None else classifier_dropout
        self.dropout = nn.Dropout(p)
        self.classifier = nn.Linear(self.config.hidden_size, num_labels)
        self._init_head(self.classifier)

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
        self._add_classifier(num_labels, classifier_dropout)

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


TAGGING_HEADS = ("softmax", "crf")


class BertForTokenClassification(BertTaskModel):
    """A label per token (NER, POS tagging). Introduced in the token tagging notebook.

    Words are cut into pieces; only each word's first piece carries its label, the other
    pieces and the specials have label -100 and are left out of the loss
    (`bertedu.data.tagging.align_word_labels`), and a word's prediction is its first
    piece's (`bertedu.data.tagging.word_predictions`).

    head="softmax" (BERT's, section 5.3): each word's tag on its own, the argmax of its
        logits; the loss is the mean cross-entropy over labelled positions.
    head="crf" (BERT+CRF): the logits are a `LinearChainCRF`'s emission scores, read at the
        sentence's words only (the first pieces: positions whose label is not -100, or
        `word_mask` where given), so the transitions run from word to word. The loss is the
        CRF's negative log-likelihood per word; in eval mode the output also holds `tags`,
        the Viterbi path, with the BIO constraints when `label_names` (the C tag names,
        "B-PER", "I-PER", "O", ...) are given. Without labels or word_mask every real
        token is a word, [CLS] and [SEP] included: pass word_mask to decode without labels.

    forward(input_ids (B, T), token_type_ids=None, attention_mask=None, labels (B, T) = None,
            *, word_mask (B, T) = None (crf only), output_hidden_states=False, output_attentions=False)
        -> TokenClassifierOutput(logits (B, T, C), loss, tags (B, T) or None: with the CRF in
           eval mode, each word's tag id at its first piece, -100 elsewhere)
    """

    def __init__(
        self,
        config: BertConfig,
        num_labels: int,
        classifier_dropout: Optional[float] = None,
        head: str = "softmax",
        label_names: Optional[Sequence[str]] = None,
        *,
        encoder: Optional[BertModel] = None,
    ):
        super().__init__(config, encoder)
        if num_labels < 2:
            raise ValueError(f"token classification needs at least 2 labels, got {num_labels}")
        if head not in TAGGING_HEADS:
            raise ValueError(f"unknown tagging head {head!r}; choose one of {TAGGING_HEADS}")
        if label_names is not None and head != "crf":
            raise ValueError("label_names set the CRF's BIO constraints: they need head='crf'")
        self.num_labels = num_labels
        self.head = head
        self._add_classifier(num_labels, classifier_dropout)
        # built after the classifier, from zeros: the same seed gives both heads the same classifier
        self.crf = LinearChainCRF(num_labels, label_names) if head == "crf" else None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        *,
        word_mask: Optional[torch.Tensor] = None,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> TokenClassifierOutput:
        out = self.encode(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        logits = self.classifier(self.dropout(out.last_hidden_state))  # (B, T, C)
        if labels is not None and attention_mask is not None:
            labels = labels.masked_fill(attention_mask == 0, IGNORE_INDEX)  # padding never counts
        if self.crf is not None:
            loss, tags = self._crf_outputs(logits, attention_mask, labels, word_mask)
            return TokenClassifierOutput(logits, loss, out.hidden_states, out.attentions, tags)
        if word_mask is not None:
            raise ValueError("word_mask tells the CRF head where the words are; the softmax head reads labels")
        loss = None
        if labels is not None:
            loss = _masked_cross_entropy(logits.flatten(0, 1), labels.flatten())
        return TokenClassifierOutput(logits, loss, out.hidden_states, out.attentions)

    def _crf_outputs(self, logits: torch.Tensor, attention_mask, labels, word_mask):
        """(loss or None, Viterbi tags (B, T) in eval mode or None), the CRF over each sentence's words."""
        if word_mask is not None:
            words = word_mask.bool()  # (B, T)
        elif labels is not None:
            words = labels != IGNORE_INDEX  # the first pieces: align_word_labels labels only those
        elif attention_mask is not None:
            words = attention_mask.bool()
        else:
            words = torch.ones(logits.shape[:2], dtype=torch.bool, device=logits.device)
        emissions, mask = pack_positions(logits, words)  # (B, W, C), (B, W)
        loss = None
        if labels is not None:
            if mask.any():
                word_labels, _ = pack_positions(labels, words)  # (B, W)
                loss = self.crf(emissions, word_labels, mask)
            else:  # truncation cut every word of the batch: no signal, but a graph for backward()
                loss = logits.sum() * 0.0
        tags = None
        if not self.training:
            paths = self.crf.decode(emissions, mask)
            packed = torch.tensor([p + [0] * (mask.shape[1] - len(p)) for p in paths],
                                  dtype=torch.long, device=logits.device).reshape(mask.shape)  # (B, W)
            tags = unpack_positions(packed, mask, words, IGNORE_INDEX)  # (B, T)
        return loss, tags


def _masked_cross_entropy(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy over labelled positions; 0 (not NaN) when none is labelled,
    as happens when truncation cuts away every labelled word of a batch."""
    if (labels != IGNORE_INDEX).any():
        return F.cross_entropy(logits.float(), labels.long(), ignore_index=IGNORE_INDEX)
    return logits.sum() * 0.0  # keeps the graph, so backward() still works


class BertForQuestionAnswering(BertTaskModel):
    """Extractive QA: where does the answer start and end? Introduced in the QA notebook.

    Input: `[CLS] question [SEP] context [SEP]` (`bertedu.data.qa.qa_features`). One linear
    layer D -> 2 gives every token a start logit and an end logit; the answer is the best
    valid span (`bertedu.data.qa.best_span`), mapped back to the context's characters
    (`bertedu.data.qa.decode_qa`).

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
