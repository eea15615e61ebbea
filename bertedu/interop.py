"""Weights to and from Hugging Face `transformers` BERT models (and RoBERTa, ALBERT and
DistilBERT), and the real MiniLM weights. `to_hf` also takes the fine-tuned heads (sequence
and token classification, question answering): `bertedu export` writes them as folders.

The two code bases hold the same tensors under different names; `hf_to_bertedu_name`
is the whole dictionary between them, one rule per line, so a learner can read
transformers' `BertLayer` against ours. Introduced in notebook 03; the parity tests in
`tests/test_interop.py` prove both models compute the same function.

`transformers` is imported inside the functions that need it: the library itself
does not depend on it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Union

import torch
from torch import nn

from .family.albert import AlbertConfig, AlbertForPreTraining, AlbertModel
from .model.config import BertConfig
from .family.distilbert import DistilBertConfig, DistilBertForMaskedLM, DistilBertModel
from .model.encoder import BertModel
from .model.heads import BertForPreTraining
from .model.tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from .family.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel

# transformers name (after "bert.")            -> bertedu name (after "bert.")
_LAYER_RULES = [
    (r"attention\.self\.query\.", "attention.query."),
    (r"attention\.self\.key\.", "attention.key."),
    (r"attention\.self\.value\.", "attention.value."),
    (r"attention\.output\.dense\.", "attention.output."),
    (r"attention\.output\.LayerNorm\.", "attention_norm."),
    (r"intermediate\.dense\.", "feed_forward.dense_in."),
    (r"output\.dense\.", "feed_forward.dense_out."),
    (r"output\.LayerNorm\.", "output_norm."),
]
_HEAD_RULES = {  # BertForPreTraining's heads
    "cls.predictions.transform.dense.": "mlm.dense.",
    "cls.predictions.transform.LayerNorm.": "mlm.layer_norm.",
    "cls.predictions.decoder.weight": "mlm.decoder.weight",
    "cls.predictions.bias": "mlm.decoder.bias",
    "cls.seq_relationship.": "nsp.classifier.",
}
# Buffers and aliases transformers keeps that hold no weights of their own.
_SKIP = re.compile(r"(position_ids|token_type_ids|cls\.predictions\.decoder\.bias)$")


def hf_to_bertedu_name(name: str) -> str | None:
    """Map one transformers parameter name to ours (None for a buffer we don't keep)."""
    if _SKIP.search(name):
        return None
    for hf, ours in _HEAD_RULES.items():
        if name.startswith(hf):
            return ours + name[len(hf):]
    prefix = ""
    if name.startswith("bert."):
        prefix, name = "bert.", name[len("bert."):]
    name = name.replace("embeddings.LayerNorm.", "embeddings.layer_norm.")
    m = re.match(r"encoder\.layer\.(\d+)\.(.*)", name)
    if m:
        index, rest = m.groups()
        for pattern, replacement in _LAYER_RULES:
            if re.match(pattern, rest):
                rest = re.sub(pattern, replacement, rest, count=1)
                break
        else:
            raise KeyError(f"no bertedu name for transformers parameter {name!r}")
        name = f"layers.{index}.{rest}"
    return prefix + name


def _convert_state_dict(hf_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {new: t for old, t in hf_state.items() if (new := hf_to_bertedu_name(old)) is not None}


# ---- RoBERTa, ALBERT, DistilBERT: the same tensors under their own names ---------------


def roberta_to_bertedu_name(name: str) -> str | None:
    """transformers RoBERTa name -> ours: BERT's names, with "roberta." and RoBERTa's LM head."""
    if name == "lm_head.decoder.bias":  # the same tensor as lm_head.bias
        return None
    if name.startswith("lm_head."):
        rest = name[len("lm_head."):]
        return "mlm." + {"bias": "decoder.bias"}.get(rest, rest)  # dense, layer_norm, decoder share names
    if name.startswith("roberta."):
        name = "bert." + name[len("roberta."):]
    return hf_to_bertedu_name(name)


_ALBERT_LAYER = "encoder.albert_layer_groups.0.albert_layers.0."  # the one layer of the one group
_ALBERT_RULES = {  # after "albert."; transformers' AlbertLayer -> our one shared BertLayer
    "embeddings.LayerNorm.": "embeddings.layer_norm.",
    "embeddings.": "embeddings.",
    "encoder.embedding_hidden_mapping_in.": "embeddings.projection.",
    _ALBERT_LAYER + "attention.dense.": "layers.layer.attention.output.",
    _ALBERT_LAYER + "attention.LayerNorm.": "layers.layer.attention_norm.",
    _ALBERT_LAYER + "attention.": "layers.layer.attention.",  # query, key, value
    _ALBERT_LAYER + "ffn.": "layers.layer.feed_forward.dense_in.",
    _ALBERT_LAYER + "ffn_output.": "layers.layer.feed_forward.dense_out.",
    _ALBERT_LAYER + "full_layer_layer_norm.": "layers.layer.output_norm.",
    "pooler.": "pooler.dense.",
}
_ALBERT_HEAD_RULES = {
    "predictions.dense.": "mlm.dense.",
    "predictions.LayerNorm.": "mlm.layer_norm.",
    "predictions.decoder.weight": "mlm.decoder.weight",
    "predictions.bias": "mlm.decoder.bias",
    "sop_classifier.classifier.": "sop.classifier.",
}


def albert_to_bertedu_name(name: str) -> str | None:
    """transformers ALBERT name -> ours (the first matching rule wins)."""
    if name == "predictions.decoder.bias" or _SKIP.search(name):  # an alias of predictions.bias; buffers
        return None
    return _rename(name, "albert.", _ALBERT_RULES, _ALBERT_HEAD_RULES)


_DISTILBERT_RULES = {  # after "distilbert."
    "embeddings.LayerNorm.": "embeddings.layer_norm.",
    "embeddings.": "embeddings.",
    "transformer.layer.": "layers.",
}
_DISTILBERT_LAYER_RULES = {  # inside one layer
    "attention.q_lin.": "attention.query.",
    "attention.k_lin.": "attention.key.",
    "attention.v_lin.": "attention.value.",
    "attention.out_lin.": "attention.output.",
    "sa_layer_norm.": "attention_norm.",
    "ffn.lin1.": "feed_forward.dense_in.",
    "ffn.lin2.": "feed_forward.dense_out.",
    "output_layer_norm.": "output_norm.",
}
_DISTILBERT_HEAD_RULES = {
    "vocab_transform.": "mlm.dense.",
    "vocab_layer_norm.": "mlm.layer_norm.",
    "vocab_projector.": "mlm.decoder.",
}


def distilbert_to_bertedu_name(name: str) -> str | None:
    """transformers DistilBERT name -> ours."""
    if _SKIP.search(name):
        return None
    new = _rename(name, "distilbert.", _DISTILBERT_RULES, _DISTILBERT_HEAD_RULES)
    m = re.match(r"((?:bert\.)?layers\.\d+\.)(.*)", new)
    if m:
        new = m.group(1) + _replace_prefix(m.group(2), _DISTILBERT_LAYER_RULES, name)
    return new


def _replace_prefix(name: str, rules: dict[str, str], original: str) -> str:
    for theirs, ours in rules.items():
        if name.startswith(theirs):
            return ours + name[len(theirs):]
    raise KeyError(f"no bertedu name for transformers parameter {original!r}")


def _rename(name: str, base: str, rules: dict[str, str], head_rules: dict[str, str]) -> str:
    """Heads by `head_rules`; the encoder by `rules`, with transformers' `base` prefix -> "bert."."""
    for theirs, ours in head_rules.items():
        if name.startswith(theirs):
            return ours + name[len(theirs):]
    prefix = ""
    if name.startswith(base):
        prefix, name = "bert.", name[len(base):]
    return prefix + _replace_prefix(name, rules, name)


# ---- from_hf / to_hf: one table of the pairs ------------------------------------------


@dataclass(frozen=True)
class _Pair:
    """A transformers class and the bertedu class holding the same weights."""

    hf_name: str  # transformers class name
    hf_config: str  # transformers config class name
    ours: type
    config: type  # bertedu config class
    rename: Callable[[str], Optional[str]]  # transformers parameter name -> ours
    heads: bool  # a model with pretraining heads (tied decoder), not a bare encoder
    pooler_optional: bool = False  # constructed with add_pooler (ours) / add_pooling_layer (theirs)


_PAIRS = [
    _Pair("BertForPreTraining", "BertConfig", BertForPreTraining, BertConfig, hf_to_bertedu_name, True),
    _Pair("BertModel", "BertConfig", BertModel, BertConfig, hf_to_bertedu_name, False, True),
    _Pair("RobertaForMaskedLM", "RobertaConfig", RobertaForMaskedLM, RobertaConfig, roberta_to_bertedu_name, True),
    _Pair("RobertaModel", "RobertaConfig", RobertaModel, RobertaConfig, roberta_to_bertedu_name, False, True),
    _Pair("AlbertForPreTraining", "AlbertConfig", AlbertForPreTraining, AlbertConfig, albert_to_bertedu_name, True),
    _Pair("AlbertModel", "AlbertConfig", AlbertModel, AlbertConfig, albert_to_bertedu_name, False, True),
    _Pair("DistilBertForMaskedLM", "DistilBertConfig", DistilBertForMaskedLM, DistilBertConfig,
          distilbert_to_bertedu_name, True),
    _Pair("DistilBertModel", "DistilBertConfig", DistilBertModel, DistilBertConfig, distilbert_to_bertedu_name, False),
]
_SUPPORTED = ", ".join(p.hf_name for p in _PAIRS)
# The fine-tuned heads (to_hf only): transformers' task classes read the same tensor names
# ("bert." + the encoder's, "classifier.", "qa_outputs."); their token and QA heads have no pooler.
_TASK_PAIRS = [
    _Pair("BertForSequenceClassification", "BertConfig", BertForSequenceClassification, BertConfig,
          hf_to_bertedu_name, False),
    _Pair("BertForTokenClassification", "BertConfig", BertForTokenClassification, BertConfig,
          hf_to_bertedu_name, False),
    _Pair("BertForQuestionAnswering", "BertConfig", BertForQuestionAnswering, BertConfig, hf_to_bertedu_name, False),
]


def from_hf(hf_model: nn.Module) -> nn.Module:
    """The bertedu model with the same weights as a transformers model.

    `transformers.BertModel` -> `BertModel`; `BertForPreTraining` -> `BertForPreTraining`;
    `RobertaModel` / `RobertaForMaskedLM`, `AlbertModel` / `AlbertForPreTraining`,
    `DistilBertModel` / `DistilBertForMaskedLM` -> the bertedu classes of the same names.
    The result is in eval mode if the source was.
    """
    name = type(hf_model).__name__
    pair = next((p for p in _PAIRS if p.hf_name == name), None)
    if pair is None:
        raise TypeError(f"from_hf takes transformers' BertModel or BertForPreTraining "
                        f"(or one of {_SUPPORTED}), got {name}")
    config = pair.config.from_hf(hf_model.config)
    if pair.pooler_optional:
        model = pair.ours(config, add_pooler=getattr(hf_model, "pooler", None) is not None)
    else:
        model = pair.ours(config)
    state = {new: t for old, t in hf_model.state_dict().items() if (new := pair.rename(old)) is not None}
    _load_exact(model, state)
    model.to(next(hf_model.parameters()).dtype)
    model.train(hf_model.training)
    return model


def to_hf(model: nn.Module, labels: Optional[list[str]] = None) -> nn.Module:
    """The transformers model with the same weights (the reverse of `from_hf`).

    Also the fine-tuned heads of `bertedu.model.tasks` (notebooks 08-11):
    `BertForSequenceClassification` (pooling="pooler"; num_labels 1 is a regressor),
    `BertForTokenClassification` (the softmax head) and `BertForQuestionAnswering` -> the
    transformers classes of the same names. `labels` (the class or tag names, in id order)
    become the config's id2label / label2id. Refused, in one line, where transformers has no
    equivalent: mean pooling, a CRF head.
    """
    import transformers

    # the most specific class first: RobertaModel is also a BertModel
    pair = next((p for cls in type(model).__mro__ for p in _PAIRS + _TASK_PAIRS if p.ours is cls), None)
    if pair is None:
        raise TypeError(f"to_hf takes a bertedu BertModel or BertForPreTraining, a fine-tuned task model "
                        f"(or a RoBERTa, ALBERT or DistilBERT model), got {type(model).__name__}")
    hf_config = getattr(transformers, pair.hf_config)(**model.config.to_hf_dict(), **_task_config(model, labels))
    hf_class = getattr(transformers, pair.hf_name)
    if pair.pooler_optional:
        hf_model = hf_class(hf_config, add_pooling_layer=model.pooler is not None)
    else:
        hf_model = hf_class(hf_config)
    ours = _without_padded_rows(model.state_dict(), model.config)
    hf_state = {}
    for hf_name in hf_model.state_dict():
        new = pair.rename(hf_name)
        if new is not None:
            hf_state[hf_name] = ours[new]
    missing, unexpected = hf_model.load_state_dict(hf_state, strict=False)
    missing = [k for k in missing if pair.rename(k) is not None]
    if missing or unexpected:
        raise RuntimeError(f"to_hf: missing {missing}, unexpected {unexpected}")
    if pair.heads:
        hf_model.tie_weights()
    hf_model.to(next(model.parameters()).dtype)
    hf_model.train(model.training)
    return hf_model


# The tensors with one row per vocabulary entry (the MLM decoder's weight is the word embeddings).
_VOCAB_ROWS = ("word_embeddings.weight", "mlm.decoder.weight", "mlm.decoder.bias")


def _without_padded_rows(state: dict[str, torch.Tensor], config: BertConfig) -> dict[str, torch.Tensor]:
    """A padded vocabulary's state dict (`BertConfig.pad_vocab_to_multiple_of`) cut to the
    tokenizer's vocab_size rows, which transformers' config holds; others as they are."""
    V, rows = config.vocab_size, config.padded_vocab_size
    if rows == V:
        return state
    return {k: t[:V] if k.endswith(_VOCAB_ROWS) and t.shape[0] == rows else t for k, t in state.items()}


def _task_config(model: nn.Module, labels: Optional[list[str]]) -> dict:
    """The config fields of a fine-tuned head (num_labels, id2label, label2id, problem_type):
    empty for an encoder or a pretraining model. Refuses a head transformers cannot run."""
    if not isinstance(model, (BertForSequenceClassification, BertForTokenClassification)):
        return {}
    if getattr(model, "pooling", "pooler") != "pooler":
        raise ValueError(f"this classifier reads the {model.pooling} of the tokens; transformers' "
                         "BertForSequenceClassification reads the pooler (tanh(dense([CLS]))): fine-tune with "
                         "--pooling pooler to export it")
    if getattr(model, "crf", None) is not None:
        raise ValueError("this tagger decodes with a CRF, which transformers' BertForTokenClassification does not "
                         "have (its tags would differ): fine-tune with --head softmax to export it")
    n = model.num_labels
    if labels is not None and len(labels) != n:
        raise ValueError(f"{len(labels)} label names for a head of {n} outputs")
    names = list(labels) if labels is not None else [f"LABEL_{i}" for i in range(n)]
    fields = {"num_labels": n, "id2label": dict(enumerate(names)), "label2id": {k: i for i, k in enumerate(names)}}
    if isinstance(model, BertForSequenceClassification):
        fields["problem_type"] = "regression" if n == 1 else "single_label_classification"
    return fields


def _load_exact(model: nn.Module, state: dict[str, torch.Tensor], assign: bool = False) -> None:
    """load_state_dict that names every missing or unexpected tensor, and checks shapes.

    assign=True: `model` was built on the meta device; its parameters become `state`'s tensors
    (as float32, what a freshly built model holds)."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise KeyError(f"weights do not fit the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    for k, t in state.items():
        if t.shape != expected[k].shape:
            raise ValueError(f"{k}: checkpoint has shape {tuple(t.shape)}, model expects {tuple(expected[k].shape)}")
    if assign:
        state = {k: t.to(expected[k].dtype) for k, t in state.items()}
    model.load_state_dict(state, assign=assign)


def load_hf_checkpoint(folder: Union[str, Path]) -> BertModel:
    """A bertedu `BertModel` from a Hugging Face folder (config.json + model.safetensors).

    Reads the safetensors file directly; transformers is not needed.
    """
    import json

    from safetensors.torch import load_file

    folder = Path(folder)
    config = BertConfig.from_hf(json.loads((folder / "config.json").read_text(encoding="utf-8")))
    raw = load_file(str(folder / "model.safetensors"))
    # Sentence-transformers checkpoints name tensors without the "bert." prefix
    # ("embeddings.word_embeddings.weight"); strip it when present so both read.
    raw = {k[len("bert."):] if k.startswith("bert.") else k: v for k, v in raw.items()}
    state = _convert_state_dict(raw)
    has_pooler = any(k.startswith("pooler.") for k in state)
    with torch.device("meta"):  # shapes only: the weights come from the file, no throw-away initialisation
        model = BertModel(config, add_pooler=has_pooler)
    _load_exact(model, state, assign=True)
    return model.eval()


def load_minilm() -> BertModel:
    """The real all-MiniLM-L6-v2 weights (6 layers, 384 wide, uncased) as a bertedu `BertModel`, in eval mode."""
    from .pretrained import minilm_dir

    return load_hf_checkpoint(minilm_dir())
