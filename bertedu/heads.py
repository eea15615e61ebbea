"""The pretraining heads: masked language model (MLM) and next sentence prediction (NSP).

Introduced in the pretraining notebooks. Devlin et al. 2019, section 3.1:
MLM predicts the original token at the ~15% selected positions; NSP reads the pooled
[CLS] vector and says whether segment B really followed segment A.

    loss = CrossEntropy(mlm_logits at labelled positions) + CrossEntropy(nsp_logits)

Labels use -100 for "no label here" (every unselected token), the ignore index of
`torch.nn.functional.cross_entropy`.
"""

from __future__ import annotations

from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from .config import BertConfig
from .encoder import BertModel, activation, init_bert_weights
from .outputs import BertPreTrainingOutput

IGNORE_INDEX = -100


class BertMLMHead(nn.Module):
    """hidden (..., D) -> vocabulary logits (..., V).

    dense + GELU + LayerNorm, then a decoder whose weight *is* the word-embedding matrix
    (tied: the same (V, D) tensor reads tokens in and writes them out), plus a bias.
    """

    def __init__(self, config: BertConfig, word_embeddings: nn.Embedding):
        super().__init__()
        D = config.hidden_size
        self.dense = nn.Linear(D, D)
        self.act = activation(config.hidden_act)
        self.layer_norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.decoder = nn.Linear(D, config.vocab_size)
        self.decoder.weight = word_embeddings.weight  # tied, not copied

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        h = self.layer_norm(self.act(self.dense(hidden)))  # (..., D)
        return self.decoder(h)  # (..., V)


class BertNSPHead(nn.Module):
    """pooled [CLS] (B, D) -> 2 logits: 0 = B follows A (IsNext), 1 = B is random (NotNext)."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.classifier = nn.Linear(config.hidden_size, 2)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(pooled)  # (B, 2)


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
        # The decoder's weight is the (already initialised) word-embedding matrix: only
        # the heads' own layers are initialised here, so the [PAD] row stays zero.
        for layer in (self.mlm.dense, self.mlm.layer_norm, self.nsp):
            layer.apply(lambda m: init_bert_weights(m, config.initializer_range))
        nn.init.zeros_(self.mlm.decoder.bias)
        self.fast_path: dict = {}  # set_fast_path(): options of bertedu.fast, none by default

    def set_fast_path(self, unpad: bool = False, sparse_mlm: bool = False, attention: str = "auto"):
        """Train on the fast path of `bertedu.fast` (same weights, same loss and gradients).

        unpad: only real tokens go through the dense layers; attention per sequence, on a
            nested tensor ("nested") or padded around attention only ("padded").
        sparse_mlm: the MLM head only on labelled positions; `mlm_logits` is then (M, V)
            with their labels in `mlm_labels`.
        Requests for hidden states or attention maps take the readable path. Returns self.
        """
        from .fast import ATTENTION_MODES

        if attention not in ATTENTION_MODES:
            raise ValueError(f"attention must be one of {ATTENTION_MODES}, got {attention!r}")
        self.fast_path = {"unpad_tokens": unpad, "sparse_mlm": sparse_mlm, "mode": attention} if (
            unpad or sparse_mlm) else {}
        return self

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
        if self.fast_path and not (output_hidden_states or output_attentions):
            from .fast import pretraining_forward

            return pretraining_forward(self, input_ids, token_type_ids, attention_mask, labels,
                                       next_sentence_label, **self.fast_path)
        out = self.bert(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        mlm_logits = self.mlm(out.last_hidden_state)  # (B, T, V)
        nsp_logits = self.nsp(out.pooler_output)  # (B, 2)
        mlm_loss = nsp_loss = loss = None
        if labels is not None:
            mlm_loss = F.cross_entropy(
                mlm_logits.flatten(0, 1).float(), labels.flatten(), ignore_index=IGNORE_INDEX
            )  # mean over labelled positions only
            loss = mlm_loss
        if next_sentence_label is not None:
            nsp_loss = F.cross_entropy(nsp_logits.float(), next_sentence_label)
            loss = nsp_loss if loss is None else loss + nsp_loss
        return BertPreTrainingOutput(
            mlm_logits=mlm_logits, nsp_logits=nsp_logits, loss=loss, mlm_loss=mlm_loss,
            nsp_loss=nsp_loss, hidden_states=out.hidden_states, attentions=out.attentions,
        )

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix counts once
