"""`BertConfig`: the hyper-parameters of a BERT, with the sizes people actually train.

Field names are the original BERT / Hugging Face ones, so a learner can read either code
base against this one and weights can be exchanged (see `bertedu.interop`).
Introduced in notebook 00; the parameter counts are worked out in notebook 04.

Presets (L layers, H hidden, A heads):

    tiny    L=2   H=128   A=2     unit tests, a laptop in seconds
    mini    L=4   H=256   A=4     Turc et al. 2019, "Well-Read Students Learn Better"
    small   L=4   H=512   A=8     Turc et al. 2019
    medium  L=8   H=512   A=8     Turc et al. 2019
    base    L=12  H=768   A=12    Devlin et al. 2019, BERT-BASE  (110M parameters)
    large   L=24  H=1024  A=16    Devlin et al. 2019, BERT-LARGE (340M parameters)

The feed-forward width is always 4H, as in the paper.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Optional

from .activations import ACTIVATIONS
from .constants import ATTENTION_KERNEL_NAMES

# (num_hidden_layers, hidden_size, num_attention_heads)
PRESETS: dict[str, tuple[int, int, int]] = {
    "tiny": (2, 128, 2),
    "mini": (4, 256, 4),
    "small": (4, 512, 8),
    "medium": (8, 512, 8),
    "base": (12, 768, 12),
    "large": (24, 1024, 16),
    "minilm": (6, 384, 12),  # the shape of all-MiniLM-L6-v2: random-weights controls for it
}


@dataclass(frozen=True)
class BertConfig:
    vocab_size: int = 30522
    hidden_size: int = 768
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    intermediate_size: int = 3072
    hidden_act: str = "gelu"
    hidden_dropout_prob: float = 0.1
    attention_probs_dropout_prob: float = 0.1
    max_position_embeddings: int = 512
    type_vocab_size: int = 2
    initializer_range: float = 0.02
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    # Which attention kernel runs (same weights either way): "reference" is the
    # formula written out, "sdpa" is torch.nn.functional.scaled_dot_product_attention.
    attn_implementation: str = "sdpa"
    # None: the word-embedding table (and the tied MLM decoder) has vocab_size rows. N: rows
    # rounded up to a multiple of N (`padded_vocab_size`; 30,522 -> 30,528 at 64), because GPU
    # matrix products run faster on multiples of 64 (NVIDIA's Linear/Fully-Connected Layers
    # User's Guide; Megatron-LM pads its vocabulary likewise).
    # vocab_size stays the tokenizer's: no token id reaches the extra rows, and the MLM head
    # cuts their logits off, so the model computes what an unpadded one computes.
    pad_vocab_to_multiple_of: Optional[int] = None

    def __post_init__(self) -> None:
        if self.hidden_size % self.num_attention_heads != 0:
            raise ValueError(
                f"hidden_size ({self.hidden_size}) must be divisible by num_attention_heads "
                f"({self.num_attention_heads}): each head gets hidden_size / num_attention_heads dims."
            )
        if self.hidden_act not in ACTIVATIONS:
            raise ValueError(f"hidden_act must be one of {tuple(ACTIVATIONS)}, got {self.hidden_act!r}")
        if self.attn_implementation not in ATTENTION_KERNEL_NAMES:
            raise ValueError(
                f"attn_implementation must be one of {ATTENTION_KERNEL_NAMES}, "
                f"got {self.attn_implementation!r}"
            )
        for name in ("vocab_size", "num_hidden_layers", "intermediate_size", "max_position_embeddings"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.type_vocab_size < 0:  # 0: no segment embeddings at all (DistilBERT)
            raise ValueError(f"type_vocab_size must be at least 0, got {self.type_vocab_size}")
        multiple = self.pad_vocab_to_multiple_of
        if multiple is not None and (isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1):
            raise ValueError(f"pad_vocab_to_multiple_of must be a whole number of at least 1 (64 on a GPU), or None "
                             f"for no padding; got {multiple!r}")
        if not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(f"pad_token_id {self.pad_token_id} is outside the vocabulary (size {self.vocab_size})")

    @property
    def head_dim(self) -> int:
        return self.hidden_size // self.num_attention_heads

    @property
    def padded_vocab_size(self) -> int:
        """Rows of the word-embedding table and the MLM decoder: vocab_size rounded up to a
        multiple of pad_vocab_to_multiple_of (vocab_size itself when that is None)."""
        multiple = self.pad_vocab_to_multiple_of or 1
        return -(-self.vocab_size // multiple) * multiple

    # ---- presets ---------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> "BertConfig":
        """A preset by name (`tiny`, `mini`, `small`, `medium`, `base`, `large`, `minilm`), with overrides."""
        if name not in PRESETS:
            raise ValueError(f"unknown preset {name!r}; choose one of {', '.join(PRESETS)}")
        layers, hidden, heads = PRESETS[name]
        fields = dict(num_hidden_layers=layers, hidden_size=hidden, num_attention_heads=heads,
                      intermediate_size=4 * hidden)
        fields.update(overrides)
        return cls(**fields)

    @classmethod
    def tiny(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("tiny", **overrides)

    @classmethod
    def mini(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("mini", **overrides)

    @classmethod
    def small(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("small", **overrides)

    @classmethod
    def medium(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("medium", **overrides)

    @classmethod
    def base(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("base", **overrides)

    @classmethod
    def large(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("large", **overrides)

    @classmethod
    def minilm(cls, **overrides: Any) -> "BertConfig":
        return cls.preset("minilm", **overrides)

    def replace(self, **changes: Any) -> "BertConfig":
        """A copy with some fields changed (`dataclasses.replace`)."""
        return dataclasses.replace(self, **changes)

    # ---- Hugging Face ----------------------------------------------------------------
    @classmethod
    def from_hf(cls, hf_config: Any) -> "BertConfig":
        """From a `transformers.BertConfig`, or a dict such as a parsed config.json."""
        get = hf_config.get if isinstance(hf_config, dict) else (lambda k, d=None: getattr(hf_config, k, d))
        position_type = get("position_embedding_type", "absolute")
        if position_type not in (None, "absolute"):
            raise ValueError(f"only absolute position embeddings are supported, got {position_type!r}")
        act = get("hidden_act", "gelu")
        act = {"gelu_new": "gelu_tanh", "gelu_pytorch_tanh": "gelu_tanh"}.get(act, act)
        names = [f.name for f in dataclasses.fields(cls) if f.name not in ("hidden_act", "attn_implementation")]
        values = {n: get(n) for n in names if get(n) is not None}
        return cls(hidden_act=act, **values)

    def to_hf_dict(self) -> dict:
        """The fields a `transformers.BertConfig` takes."""
        d = dataclasses.asdict(self)
        d.pop("attn_implementation")
        d.pop("pad_vocab_to_multiple_of")  # transformers gets the real vocabulary: interop drops the extra rows
        d["hidden_act"] = {"gelu_tanh": "gelu_new"}[self.hidden_act] if self.hidden_act == "gelu_tanh" else self.hidden_act
        return d
