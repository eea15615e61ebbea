"""DistilBERT (Sanh et al. 2019, "DistilBERT, a distilled version of BERT: smaller, faster,
cheaper and lighter"): a BERT with half the layers, trained to imitate a BERT teacher.

The network is BERT's with three things removed:

    segments   no token-type embeddings (type_vocab_size=0)
    pooler     none: no NSP to read it
    depth      6 layers for a 12-layer teacher, initialised from every other teacher layer
               (`student_from_teacher`)

66,362,880 parameters for DistilBERT-BASE (DistilBertModel; tests/test_variants.py counts
them on the meta device). The training objective, the triple loss of soft targets, MLM and
a cosine loss on hidden states, is in `bertedu.family.distillation`.

Deliberate deviation from transformers' `DistilBertModel`: in training, bertedu's layer also
applies dropout to the attention output projection, as BERT does (transformers' DistilBERT
does not); in eval mode the two are the same function (tests/test_variants.py).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional, Sequence, Union

import torch

from ..model.config import BertConfig
from ..model.encoder import BertModel
from ..model.heads import BertForMaskedLM, BertForPreTraining

# transformers' DistilBertConfig field  -> BertConfig field
_HF_FIELDS = {
    "vocab_size": "vocab_size",
    "max_position_embeddings": "max_position_embeddings",
    "n_layers": "num_hidden_layers",
    "n_heads": "num_attention_heads",
    "dim": "hidden_size",
    "hidden_dim": "intermediate_size",
    "dropout": "hidden_dropout_prob",
    "attention_dropout": "attention_probs_dropout_prob",
    "activation": "hidden_act",
    "initializer_range": "initializer_range",
    "pad_token_id": "pad_token_id",
}
_LAYER_NORM_EPS = 1e-12  # fixed in DistilBERT, not a config field


@dataclass(frozen=True)
class DistilBertConfig(BertConfig):
    """`BertConfig` with DistilBERT's defaults: 6 layers, no token types (BERT-BASE widths)."""

    num_hidden_layers: int = 6
    type_vocab_size: int = 0

    @classmethod
    def from_hf(cls, hf_config: Any) -> "DistilBertConfig":
        """From a `transformers.DistilBertConfig` (its own field names: dim, n_layers, ...) or its dict."""
        get = hf_config.get if isinstance(hf_config, dict) else (lambda k, d=None: getattr(hf_config, k, d))
        if get("sinusoidal_pos_embds", False):
            raise ValueError("sinusoidal_pos_embds=True is not supported: bertedu's DistilBERT learns its positions")
        values = {ours: get(theirs) for theirs, ours in _HF_FIELDS.items() if get(theirs) is not None}
        act = values.get("hidden_act", "gelu")
        values["hidden_act"] = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}.get(act, act)
        return cls(layer_norm_eps=_LAYER_NORM_EPS, type_vocab_size=0, **values)

    def to_hf_dict(self) -> dict:
        """The fields a `transformers.DistilBertConfig` takes."""
        if self.type_vocab_size != 0 or self.layer_norm_eps != _LAYER_NORM_EPS:
            raise ValueError("transformers' DistilBERT has no token types and LayerNorm eps 1e-12: "
                             f"got type_vocab_size={self.type_vocab_size}, layer_norm_eps={self.layer_norm_eps}")
        d = {theirs: getattr(self, ours) for theirs, ours in _HF_FIELDS.items()}
        d["activation"] = {"gelu_tanh": "gelu_new"}.get(self.hidden_act, self.hidden_act)
        return d


class DistilBertModel(BertModel):
    """`BertModel` without a pooler; with `DistilBertConfig` also without token types."""

    def __init__(self, config: BertConfig):
        super().__init__(config, add_pooler=False)


class DistilBertForMaskedLM(BertForMaskedLM):
    """DistilBERT's encoder with BERT's MLM head: forward(...) -> `MaskedLMOutput`."""

    def __init__(self, config: BertConfig):
        super().__init__(config, bert=DistilBertModel(config))


Teacher = Union[BertModel, BertForPreTraining, BertForMaskedLM]


def student_from_teacher(teacher: Teacher, layers: Optional[Sequence[int]] = None) -> Union[
        DistilBertModel, DistilBertForMaskedLM]:
    """A DistilBERT student initialised from a BERT teacher's weights (Sanh et al. 2019, sec. 3).

    layers: which teacher layers the student keeps, in order; every other one by default
        (0, 2, 4, ... : 6 of 12). (The released distilbert-base-uncased kept 0, 2, 4, 7, 9, 11.)
    Embeddings are copied, except that the teacher's segment-A vector (token type 0) is
    added into every position vector: the student has no token types, and on single-segment
    input its embeddings then equal the teacher's. A teacher with an MLM head gives a
    `DistilBertForMaskedLM` with that head copied; a bare encoder a `DistilBertModel`.
    The teacher is not changed; no tensor is shared with it.
    """
    encoder = teacher if isinstance(teacher, BertModel) else teacher.bert
    if type(encoder) is not BertModel and not isinstance(encoder, DistilBertModel):
        raise TypeError(f"student_from_teacher takes a BERT or DistilBERT teacher, got {type(encoder).__name__} "
                        "(RoBERTa numbers positions differently; ALBERT's layers are one shared layer)")
    depth = encoder.config.num_hidden_layers
    layers = list(range(0, depth, 2) if layers is None else layers)
    if not layers or any(not 0 <= i < depth for i in layers):
        raise ValueError(f"layers must be teacher layer indices in 0..{depth - 1}, got {layers}")
    fields = {f.name: getattr(encoder.config, f.name) for f in dataclasses.fields(BertConfig)}
    config = DistilBertConfig(**{**fields, "num_hidden_layers": len(layers), "type_vocab_size": 0})
    student = DistilBertForMaskedLM(config) if hasattr(teacher, "mlm") else DistilBertModel(config)
    student_encoder = student if isinstance(student, BertModel) else student.bert
    with torch.no_grad():
        t_emb, s_emb = encoder.embeddings, student_encoder.embeddings
        s_emb.word_embeddings.weight.copy_(t_emb.word_embeddings.weight)
        positions = t_emb.position_embeddings.weight  # (P, D)
        if t_emb.token_type_embeddings is not None:
            positions = positions + t_emb.token_type_embeddings.weight[0]  # fold segment A in
        s_emb.position_embeddings.weight.copy_(positions)
        s_emb.layer_norm.load_state_dict(t_emb.layer_norm.state_dict())
        for j, i in enumerate(layers):
            student_encoder.layers[j].load_state_dict(encoder.layers[i].state_dict())
        if hasattr(teacher, "mlm"):
            student.mlm.load_state_dict(teacher.mlm.state_dict())  # decoder.weight: the word embeddings again
    return student.train(teacher.training)
