"""ALBERT (Lan et al. 2020, "ALBERT: A Lite BERT for Self-supervised Learning of Language
Representations"): BERT's network with two parameter-saving changes and a new sentence task.

    factorised embeddings  tokens are embedded in E dims (E = 128 << H) and projected to H:
                           V*E + E*H parameters instead of V*H (`AlbertEmbeddings`)
    cross-layer sharing    one encoder layer, run num_hidden_layers times (`SharedLayers`):
                           the stack costs one layer's parameters, and all L layers' compute
    SOP                    sentence-order prediction replaces NSP: are segments A and B in
                           their original order (0) or swapped (1)? (`SentenceOrderHead`)

Everything else is BERT's: the attention, the encoder layer, the pooler, the MLM head (which
ends in E dims because its decoder is tied to the E-wide embedding table). Parameter counts
(AlbertModel, vocabulary 30,000, E = 128): 11,683,584 for ALBERT-BASE and 17,683,968 for
ALBERT-LARGE (tests/test_variants.py counts them on the meta device).

Deliberate deviations from transformers' `AlbertModel`: only the published layout of one
layer group holding one layer (num_hidden_groups = inner_group_num = 1, every released
ALBERT); in training, bertedu's layer also applies dropout to the feed-forward output, as
BERT does (ALBERT v2 trains with dropout 0, where the two agree).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

import torch
from torch import nn

from ..model.config import BertConfig
from ..model.embeddings import BertEmbeddings
from ..model.encoder import BertLayer, BertModel
from ..model.heads import BertMLMHead, BertNSPHead, init_head_layers, pretraining_loss
from ..model.outputs import AlbertPreTrainingOutput


@dataclass(frozen=True)
class AlbertConfig(BertConfig):
    """`BertConfig` with ALBERT's defaults and its two extra fields; presets as BERT's
    (`AlbertConfig.base()`: L=12, H=768; `.large()`: L=24, H=1024)."""

    vocab_size: int = 30000
    hidden_act: str = "gelu_tanh"  # "gelu_new" in transformers' configs
    hidden_dropout_prob: float = 0.0  # ALBERT v2 trains without dropout
    attention_probs_dropout_prob: float = 0.0
    embedding_size: int = 128  # E: the width of the token, position and segment tables
    classifier_dropout_prob: float = 0.1  # before the SOP classifier

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.embedding_size < 1:
            raise ValueError(f"embedding_size must be at least 1, got {self.embedding_size}")

    @classmethod
    def from_hf(cls, hf_config: Any) -> "AlbertConfig":
        """From a `transformers.AlbertConfig` (or its dict); one layer group of one layer only."""
        get = hf_config.get if isinstance(hf_config, dict) else (lambda k, d=None: getattr(hf_config, k, d))
        groups, inner = get("num_hidden_groups", 1), get("inner_group_num", 1)
        if (groups, inner) != (1, 1):
            raise ValueError(f"only ALBERT's published layout is supported (num_hidden_groups=1, "
                             f"inner_group_num=1), got {groups} and {inner}")
        return super().from_hf(hf_config)


class AlbertEmbeddings(BertEmbeddings):
    """BERT's three embeddings in E dims, then one projection up to H: (B, T) -> (B, T, H)."""

    def __init__(self, config: AlbertConfig):
        super().__init__(config, dim=config.embedding_size)
        self.projection = nn.Linear(config.embedding_size, config.hidden_size)

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        return self.projection(super().forward(input_ids, token_type_ids))  # (B, T, E) -> (B, T, H)


class SharedLayers(nn.Module):
    """One `BertLayer`, run num_hidden_layers times: ALBERT's cross-layer sharing.

    Iterating gives the same layer L times, so `BertModel.forward` (and the fast path) run
    it unchanged; its weights are stored once, under `layers.layer`.
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.layer = BertLayer(config)
        self.depth = config.num_hidden_layers

    def __iter__(self) -> Iterator[BertLayer]:
        return itertools.repeat(self.layer, self.depth)

    def __len__(self) -> int:
        return self.depth

    def __getitem__(self, index: int) -> BertLayer:
        if not -self.depth <= index < self.depth:
            raise IndexError(f"layer {index} of {self.depth}")
        return self.layer


class AlbertModel(BertModel):
    """`BertModel` on factorised embeddings and one shared layer; same forward and outputs."""

    def build_embeddings(self, config: BertConfig) -> nn.Module:
        return AlbertEmbeddings(config)

    def build_layers(self, config: BertConfig) -> nn.Module:
        return SharedLayers(config)


class SentenceOrderHead(BertNSPHead):
    """pooled [CLS] (B, D) -> 2 logits: 0 = A then B as written, 1 = swapped.

    NSP's classifier, read differently: SOP's negatives are the same two segments in the
    wrong order, so topic alone cannot give the answer away. Dropout first, as ALBERT's.
    """

    def __init__(self, config: AlbertConfig):
        super().__init__(config)
        self.dropout = nn.Dropout(config.classifier_dropout_prob)

    def forward(self, pooled: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.dropout(pooled))  # (B, 2)


class AlbertForPreTraining(nn.Module):
    """`AlbertModel` with the MLM head and the sentence-order (SOP) head.

    forward(input_ids, token_type_ids=None, attention_mask=None, labels=None,
            sentence_order_label=None, output_hidden_states=False, output_attentions=False)
    -> `AlbertPreTrainingOutput` (mlm_logits, sop_logits, loss, mlm_loss, sop_loss).
    labels (B, T): original ids at selected positions, -100 elsewhere;
    sentence_order_label (B,): 0 original order, 1 swapped.
    loss = MLM cross-entropy + SOP cross-entropy (the same loss NSP uses, on other labels).
    """

    def __init__(self, config: AlbertConfig):
        super().__init__()
        self.config = config
        self.bert = AlbertModel(config)
        self.mlm = BertMLMHead(config, self.bert.embeddings.word_embeddings)  # H -> E -> V
        self.sop = SentenceOrderHead(config)
        init_head_layers(config, self.mlm, self.sop)
        # bertedu.model.fast.set_fast_path plugs its forward in here, as in BertForPreTraining.
        self.fast_forward: Optional[Callable[..., Any]] = None

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        sentence_order_label: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> AlbertPreTrainingOutput:
        if self.fast_forward is not None and not (output_hidden_states or output_attentions):
            fast = self.fast_forward(self, input_ids, token_type_ids, attention_mask, labels, sentence_order_label)
            return AlbertPreTrainingOutput(
                mlm_logits=fast.mlm_logits, sop_logits=fast.nsp_logits, loss=fast.loss, mlm_loss=fast.mlm_loss,
                sop_loss=fast.nsp_loss, mlm_labels=fast.mlm_labels,
            )
        out = self.bert(
            input_ids, token_type_ids, attention_mask,
            output_hidden_states=output_hidden_states, output_attentions=output_attentions,
        )
        mlm_logits = self.mlm(out.last_hidden_state)  # (B, T, V)
        sop_logits = self.sop(out.pooler_output)  # (B, 2)
        loss, mlm_loss, sop_loss = pretraining_loss(mlm_logits, labels, sop_logits, sentence_order_label)
        return AlbertPreTrainingOutput(
            mlm_logits=mlm_logits, sop_logits=sop_logits, loss=loss, mlm_loss=mlm_loss, sop_loss=sop_loss,
            hidden_states=out.hidden_states, attentions=out.attentions,
        )

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix and the shared layer count once
