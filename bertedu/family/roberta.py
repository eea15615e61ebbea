"""RoBERTa (Liu et al. 2019, "RoBERTa: A Robustly Optimized BERT Pretraining Approach").

The network is BERT's: the same embeddings, attention, encoder layers and MLM head, so
this module holds only what differs, as a config and two small subclasses.

    training   MLM only, no NSP; dynamic masking; long FULL-SENTENCES inputs; bigger
               batches, more data (the recipe, not the model: see the pretraining code)
    vocabulary byte-level BPE, 50,265 pieces; <s>=0, <pad>=1, </s>=2
    segments   one token type (type_vocab_size=1); a pair still reads as <s> A </s></s> B </s>
               (`pair_input_ids`): the separators, not a segment embedding, mark where A ends
    positions  numbered from pad_token_id + 1 and per sequence, skipping padding
               (`create_position_ids`), as fairseq's reference implementation does; so
               514 position rows hold 512 tokens
    LayerNorm  eps 1e-5; the MLM head's non-linearity is always the exact GELU

Parameter counts (RobertaModel with pooler): 124,645,632 for RoBERTa-BASE, 355,359,744
for RoBERTa-LARGE (tests/test_variants.py counts them on the meta device).
Weights convert to and from transformers' `RobertaModel` / `RobertaForMaskedLM` with
`bertedu.interop.from_hf` / `to_hf`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..model.config import BertConfig
from ..model.embeddings import BertEmbeddings
from ..model.encoder import BertModel
from ..model.heads import BertForMaskedLM


@dataclass(frozen=True)
class RobertaConfig(BertConfig):
    """`BertConfig` with RoBERTa's defaults; presets `RobertaConfig.base()`, `.large()` as BERT's."""

    vocab_size: int = 50265
    max_position_embeddings: int = 514
    type_vocab_size: int = 1
    layer_norm_eps: float = 1e-5
    pad_token_id: int = 1

    @property
    def max_tokens(self) -> int:
        """The longest sequence that fits: positions start after the padding index."""
        return self.max_position_embeddings - self.pad_token_id - 1


def create_position_ids(input_ids: torch.Tensor, pad_token_id: int) -> torch.Tensor:
    """input_ids (B, T) -> position ids (B, T), the reference implementation's rule.

    Real tokens are numbered pad_token_id + 1, pad_token_id + 2, ... in reading order
    (pad_token_id + the running count of non-pad tokens); padding tokens get
    pad_token_id itself, whose position row is a padding row. Padding is read from the
    ids, not the attention mask. With pad_token_id=1: [<s> a b </s> <pad>] -> [2 3 4 5 1].
    """
    real = (input_ids != pad_token_id).long()  # (B, T)
    return real.cumsum(dim=1) * real + pad_token_id  # (B, T)


class RobertaEmbeddings(BertEmbeddings):
    """BERT's embeddings with RoBERTa's position numbering (`create_position_ids`)."""

    def __init__(self, config: RobertaConfig):
        super().__init__(config)
        # The padding position row, like the padding token row, is zero and never trained.
        self.position_embeddings = nn.Embedding(
            config.max_position_embeddings, config.hidden_size, padding_idx=config.pad_token_id)

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        return create_position_ids(input_ids, self.config.pad_token_id)  # (B, T)

    def _check(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> None:
        limit = self.config.max_tokens
        if input_ids.size(1) > limit:
            raise ValueError(
                f"sequence of {input_ids.size(1)} tokens is too long: RoBERTa numbers positions from "
                f"pad_token_id + 1 = {self.config.pad_token_id + 1}, so max_position_embeddings="
                f"{self.config.max_position_embeddings} holds {limit} tokens; truncate it when encoding."
            )
        super()._check(input_ids, token_type_ids)


class RobertaModel(BertModel):
    """`BertModel` on `RobertaEmbeddings`; same forward, same outputs."""

    def build_embeddings(self, config: BertConfig) -> nn.Module:
        return RobertaEmbeddings(config)


class RobertaForMaskedLM(BertForMaskedLM):
    """RoBERTa's pretraining model: the encoder (no pooler) and the MLM head, no NSP.

    forward(input_ids, token_type_ids=None, attention_mask=None, labels=None, ...)
    -> `MaskedLMOutput` (mlm_logits, loss).
    """

    def __init__(self, config: RobertaConfig):
        super().__init__(config, bert=RobertaModel(config, add_pooler=False))
        self.mlm.act = F.gelu  # RoBERTa's head uses the exact GELU whatever hidden_act says


def pair_input_ids(ids_a: list[int], ids_b: list[int], cls_token_id: int = 0, sep_token_id: int = 2) -> list[int]:
    """RoBERTa's sentence pair, `<s> A </s></s> B </s>`, as fairseq and transformers' RobertaTokenizer
    build it (notebook 15). Every token has type 0: the two separators mark where A ends.
    Defaults: RoBERTa's ids, <s> = 0 and </s> = 2."""
    return [cls_token_id, *ids_a, sep_token_id, sep_token_id, *ids_b, sep_token_id]
