"""Weights to and from Hugging Face `transformers` BERT models, and the real MiniLM weights.

The two code bases hold the same tensors under different names; `hf_to_bertedu_name`
is the whole dictionary between them, one rule per line, so a learner can read
transformers' `BertLayer` against ours. Introduced in notebook 03; the parity tests in
`tests/test_interop.py` prove both models compute the same function.

`transformers` is imported inside the functions that need it: the library itself
does not depend on it.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Union

import torch
from torch import nn

from .config import BertConfig
from .encoder import BertModel
from .heads import BertForPreTraining

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


def from_hf(hf_model: nn.Module) -> Union[BertModel, BertForPreTraining]:
    """The bertedu model with the same weights as a transformers BERT.

    `transformers.BertModel` -> `BertModel`; `transformers.BertForPreTraining` ->
    `BertForPreTraining`. The result is in eval mode if the source was.
    """
    name = type(hf_model).__name__
    if name not in ("BertForPreTraining", "BertModel"):
        raise TypeError(f"from_hf takes transformers' BertModel or BertForPreTraining, got {name}")
    config = BertConfig.from_hf(hf_model.config)
    if name == "BertForPreTraining":
        model = BertForPreTraining(config)
    elif name == "BertModel":
        model = BertModel(config, add_pooler=getattr(hf_model, "pooler", None) is not None)
    state = _convert_state_dict(hf_model.state_dict())
    _load_exact(model, state)
    model.to(next(hf_model.parameters()).dtype)
    model.train(hf_model.training)
    return model


def to_hf(model: Union[BertModel, BertForPreTraining]) -> nn.Module:
    """The transformers model (BertModel or BertForPreTraining) with the same weights."""
    import transformers

    hf_config = transformers.BertConfig(**model.config.to_hf_dict())
    if isinstance(model, BertForPreTraining):
        hf_model = transformers.BertForPreTraining(hf_config)
    elif isinstance(model, BertModel):
        hf_model = transformers.BertModel(hf_config, add_pooling_layer=model.pooler is not None)
    else:
        raise TypeError(f"to_hf takes a bertedu BertModel or BertForPreTraining, got {type(model).__name__}")
    ours = model.state_dict()
    hf_state = {}
    for hf_name in hf_model.state_dict():
        new = hf_to_bertedu_name(hf_name)
        if new is not None:
            hf_state[hf_name] = ours[new]
    missing, unexpected = hf_model.load_state_dict(hf_state, strict=False)
    missing = [k for k in missing if hf_to_bertedu_name(k) is not None]
    if missing or unexpected:
        raise RuntimeError(f"to_hf: missing {missing}, unexpected {unexpected}")
    if isinstance(model, BertForPreTraining):
        hf_model.tie_weights()
    hf_model.to(next(model.parameters()).dtype)
    hf_model.train(model.training)
    return hf_model


def _load_exact(model: nn.Module, state: dict[str, torch.Tensor]) -> None:
    """load_state_dict that names every missing or unexpected tensor, and checks shapes."""
    expected = model.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    if missing or unexpected:
        raise KeyError(f"weights do not fit the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    for k, t in state.items():
        if t.shape != expected[k].shape:
            raise ValueError(f"{k}: checkpoint has shape {tuple(t.shape)}, model expects {tuple(expected[k].shape)}")
    model.load_state_dict(state)


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
    model = BertModel(config, add_pooler=has_pooler)
    _load_exact(model, state)
    return model.eval()


def load_minilm() -> BertModel:
    """The real all-MiniLM-L6-v2 weights (6 layers, 384 wide, uncased) as a bertedu `BertModel`, in eval mode."""
    from .pretrained import minilm_dir

    return load_hf_checkpoint(minilm_dir())
