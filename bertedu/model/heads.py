"""The pretraining heads: masked language model (MLM) and next sentence prediction (NSP).

Introduced in the pretraining notebooks. Devlin et al. 2019, section 3.1:
MLM predicts the original token at the ~15% selected positions; NSP reads the pooled
[CLS] vector and says whether segment B really followed segment A.

    loss = CrossEntropy(mlm_logits at labelled positions) + CrossEntropy(nsp_logits)

Labels use -100 for "no label here" (every unselected token), the ignore index of
`torch.nn.functional.cross_entropy`. `BertForMaskedLM` is the MLM head alone, how RoBERTa
and DistilBERT pretrain (`bertedu.family.roberta`, `bertedu.family.distilbert`).
"""

from __future__ import annotations

from typing import Callable, Optional

import torch
import torch.nn.functional as F
from torch import nn

from .activations import activation
from .config import BertConfig
from .constants import IGNORE_INDEX
from .encoder import BertModel, init_bert_weights
from .outputs import BertPreTrainingOutput, MaskedLMOutput


class BertMLMHead(nn.Module):
    """hidden (..., D) -> vocabulary logits (..., V).

    dense + GELU + LayerNorm, then a decoder whose weight *is* the word-embedding matrix
    (tied: the same (V, D) tensor reads tokens in and writes them out), plus a bias.
    The head ends in the embeddings' width E: D for BERT, E < D for ALBERT.
    A padded vocabulary (`BertConfig.pad_vocab_to_multiple_of`): the decoder multiplies by
    all padded_vocab_size rows (the fast shape on a GPU), then the logits of the extra rows
    are cut off, so they are never predicted, take no probability and get no gradient.
    """

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        D, E = config.hidden_size, word_embeddings.embedding_dim
        self.dense = nn.Linear(D, E)
        self.act = activation(config.hidden_act)
        self.layer_norm = nn.LayerNorm(E, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(E, config.vocab_size)  # built at V: the random numbers an unpadded head draws
        self.decoder.weight = word_embeddings.weight  # tied, not copied
        self.vocab_size = config.vocab_size
        if config.padded_vocab_size > config.vocab_size:  # init_head_layers zeroes the bias
            self.decoder.bias = nn.Parameter(torch.zeros(config.padded_vocab_size))
            self.decoder.out_features = config.padded_vocab_size

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm(self.act(self.dense(hidden)))  # (..., D)
        logits = self.decoder(h)  # (..., V), or (..., padded_vocab_size)
        if logits.size(-1) > self.vocab_size:
            logits = logits[..., : self.vocab_size]  # (..., V): the padded rows are no tokens
        return logits


class BertNSPHead(nn.Module):
    """pooled [CLS] (B, D) -> 2 logits: 0 = B follows A (IsNext), 1 = B is random (NotNext)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(pooled)  # (B, 2)


def init_head_layers(config: BertConfig, mlm: BertMLMHead, *others: nn.Module) -> None:
    """BERT's initialisation for the layers a pretraining model adds on top of its encoder.

    The MLM decoder's weight is the (already initialised) word-embedding matrix, so only
    the head's own dense and LayerNorm (and `others`: NSP, SOP) are initialised here, and
    the [PAD] row stays zero; the decoder's bias starts at 0.
    """
    for layer in (mlm.dense, mlm.layer_norm, *others):
        layer.apply(lambda m: init_bert_weights(m, config.initializer_range))
    nn.init.zeros_(mlm.decoder.bias)


class BertForPreTraining(nn.Module):
    """`BertModel` with the MLM and NSP heads.

    forward(input_ids, token_type_ids=None, attention_mask=None, labels=None,
            next_sentence_label=None, output_hidden_states=False, output_attentions=False)
    labels (B, T): the original token id at selected positions, -100 elsewhere.
    next_sentence_label (B,): 0 IsNext, 1 NotNext.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.bert = BertModel(config)
        self.mlm = BertMLMHead(config, self.bert.embeddings.word_embeddings)
        self.nsp = BertNSPHead(config)
        init_head_layers(config, self.mlm, self.nsp)
        # The fast path (bertedu.model.fast.set_fast_path) plugs its forward in here; None: the
        # readable forward below. This module never imports the fast one.
        self.fast_forward: Optional[Callable[..., BertPreTrainingOutput]] = None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        next_sentence_label: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertPreTrainingOutput:
        if self.fast_forward is not None and not (output_hidden_states or output_attentions):
            return self.fast_forward(self, input_ids, token_type_ids, attention_mask, labels, next_sentence_label)
        out = self.bert(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        mlm_logits = self.mlm(out.last_hidden_state)  # (B, T, V)
        nsp_logits = self.nsp(out.pooler_output)  # (B, 2)
        loss, mlm_loss, nsp_loss = pretraining_loss(mlm_logits, labels, nsp_logits, next_sentence_label)
        return BertPreTrainingOutput(
            mlm_logits=mlm_logits, nsp_logits=nsp_logits, loss=loss, mlm_loss=mlm_loss,
            nsp_loss=nsp_loss, hidden_states=out.hidden_states, attentions=out.attentions,
        )

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix counts once


def pretraining_loss(
    mlm_logits: torch.Tensor,
    labels: Optional[torch.Tensor],
    nsp_logits: torch.Tensor,
    next_sentence_label: Optional[torch.Tensor],
) -> tuple[Optional[torch.Tensor], Optional[torch.Tensor], Optional[torch.Tensor]]:
    """(loss, mlm_loss, nsp_loss): each part when its labels are given, loss their sum.

    mlm_logits (..., V) with labels (...): any leading shape, (B, T) here or (M,) rows on
    the sparse fast path; cross-entropy is averaged over labelled positions only
    (label != IGNORE_INDEX). nsp_logits (B, 2) with next_sentence_label (B,).
    Both losses are computed in fp32, also under bf16 autocast.
    """
    mlm_loss = nsp_loss = loss = None
    if labels is not None:
        mlm_loss = loss = masked_lm_loss(mlm_logits, labels)
    if next_sentence_label is not None:
        nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label)
        loss = nsp_loss if loss is None else loss + nsp_loss
    return loss, mlm_loss, nsp_loss


def masked_lm_loss(mlm_logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Cross-entropy over the labelled positions only (label != IGNORE_INDEX), in fp32.

    mlm_logits (..., V) with labels (...): (B, T) or the (M,) rows of the sparse fast path.
    """
    return F.cross_entropy(mlm_logits.flatten(0, -2).float(), labels.flatten(), ignore_index=IGNORE_INDEX)


class BertForMaskedLM(nn.Module):
    """An encoder with the MLM head alone, no NSP: how RoBERTa and DistilBERT pretrain.

    forward(input_ids, token_type_ids=None, attention_mask=None, labels=None,
            output_hidden_states=False, output_attentions=False) -> MaskedLMOutput
    bert: the encoder to put the head on; a `BertModel` without pooler unless given
    (`bertedu.family.roberta` and `bertedu.family.distilbert` pass theirs).
    """

    def __init__(self, config: BertConfig, bert: Optional[BertModel] = None):
        super().__init__()
        self.config = config
        self.bert = BertModel(config, add_pooler=False) if bert is None else bert
        self.mlm = BertMLMHead(config, self.bert.embeddings.word_embeddings)
        init_head_layers(config, self.mlm)
        # bertedu.model.fast.set_fast_path plugs its forward in here, as in BertForPreTraining.
        self.fast_forward: Optional[Callable[..., BertPreTrainingOutput]] = None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> MaskedLMOutput:
        if self.fast_forward is not None and not (output_hidden_states or output_attentions):
            fast = self.fast_forward(self, input_ids, token_type_ids, attention_mask, labels, None)
            return MaskedLMOutput(mlm_logits=fast.mlm_logits, loss=fast.loss, mlm_loss=fast.mlm_loss,
                                  mlm_labels=fast.mlm_labels)
        out = self.bert(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        mlm_logits = self.mlm(out.last_hidden_state)  # (B, T, V)
        loss = None if labels is None else masked_lm_loss(mlm_logits, labels)
        return MaskedLMOutput(mlm_logits=mlm_logits, loss=loss, mlm_loss=loss,
                              hidden_states=out.hidden_states, attentions=out.attentions)

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix counts once
