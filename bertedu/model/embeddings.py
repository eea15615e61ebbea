"""BERT's input embeddings: token + segment + learned position, summed, then LayerNorm.

Introduced in notebook 02, where the learned position table is set against the
Transformer's fixed sinusoidal one (`sinusoidal_positions`).
"""

from __future__ import annotations

import math
from typing import Optional

import torch
from torch import nn

from .config import BertConfig


def sinusoidal_positions(T: int, D: int) -> torch.Tensor:
    """The Transformer's fixed position table (Vaswani et al. 2017, section 3.5), (T, D).

    PE[pos, 2i] = sin(pos / 10000^(2i/D)),  PE[pos, 2i+1] = cos(pos / 10000^(2i/D)).
    BERT learns its table instead; notebook 02 compares the two.
    """
    pos = torch.arange(T, dtype=torch.float32)[:, None]  # (T, 1)
    freq = torch.exp(-math.log(10000.0) * torch.arange(0, D, 2, dtype=torch.float32) / D)  # (ceil(D/2),)
    table = torch.zeros(T, D)
    table[:, 0::2] = torch.sin(pos * freq)  # (T, ceil(D/2))
    table[:, 1::2] = torch.cos(pos * freq)[:, : D // 2]  # (T, floor(D/2))
    return table


def word_embedding_table(config: BertConfig, dim: int) -> nn.Embedding:
    """The (V, dim) word-embedding table, or with `config.pad_vocab_to_multiple_of` set a
    (padded_vocab_size, dim) one whose extra rows are zero (a GPU multiplies faster by it).

    num_embeddings stays V: the rows a token id may index and BERT's initialisation draws
    (`init_bert_weights`), so a padded model draws the same random numbers as an unpadded
    one and starts, seed for seed, with the same weights. No notebook builds a padded table:
    it is an option for GPU runs (docs/gpu_route.md).
    """
    table = nn.Embedding(config.vocab_size, dim, padding_idx=config.pad_token_id)
    extra = config.padded_vocab_size - config.vocab_size
    if extra:
        weight = table.weight.detach()
        table.weight = nn.Parameter(torch.cat([weight, weight.new_zeros(extra, dim)]))  # (V + extra, dim)
    return table


class BertEmbeddings(nn.Module):
    """input_ids (B, T), token_type_ids (B, T) -> (B, T, D).

    dim: the embedding width, hidden_size unless given (ALBERT embeds in E < H dims).
    type_vocab_size=0 in the config: no segment table at all (DistilBERT).
    """

    def __init__(self, config: BertConfig, dim: Optional[int] = None):
        super().__init__()
        D = config.hidden_size if dim is None else dim
        self.config = config
        self.word_embeddings = word_embedding_table(config, D)
        self.position_embeddings = nn.Embedding(config.max_position_embeddings, D)
        self.token_type_embeddings = nn.Embedding(config.type_vocab_size, D) if config.type_vocab_size else None
        self.layer_norm = nn.LayerNorm(D, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor] = None) -> torch.Tensor:
        self._check(input_ids, token_type_ids)
        x = self.word_embeddings(input_ids)  # (B, T, D)
        if self.token_type_embeddings is not None:
            if token_type_ids is None:
                token_type_ids = torch.zeros_like(input_ids)  # a single segment, "A"
            x = x + self.token_type_embeddings(token_type_ids)  # (B, T, D)
        x = x + self.position_embeddings(self.position_ids(input_ids))  # (T, D) broadcast, or (B, T, D)
        return self.dropout(self.layer_norm(x))  # (B, T, D)

    def position_ids(self, input_ids: torch.Tensor) -> torch.Tensor:
        """BERT numbers the positions 0..T-1 in every sequence: (T,), broadcast over the batch.

        A variant may number them per sequence instead, (B, T) (RoBERTa, `bertedu.family.roberta`).
        """
        return torch.arange(input_ids.size(1), device=input_ids.device)  # (T,)

    def _check(self, input_ids: torch.Tensor, token_type_ids: Optional[torch.Tensor]) -> None:
        """Turn the usual indexing crashes into errors that say what to fix."""
        cfg = self.config
        T = input_ids.size(1)
        if T > cfg.max_position_embeddings:
            raise ValueError(
                f"sequence of {T} tokens is longer than max_position_embeddings="
                f"{cfg.max_position_embeddings}: truncate it when encoding "
                "(tokenizer.encode(..., max_length=...)) or use a config with more positions."
            )
        if token_type_ids is not None and token_type_ids.shape != input_ids.shape:
            raise ValueError(f"token_type_ids {tuple(token_type_ids.shape)} must match input_ids {tuple(input_ids.shape)}")
        if input_ids.is_cuda or torch.compiler.is_compiling():
            return  # reading values would stall the GPU (CUDA asserts on its own) or break the graph
        bad = input_ids[(input_ids < 0) | (input_ids >= cfg.vocab_size)]
        if bad.numel():
            raise ValueError(
                f"token id {int(bad[0])} is outside the model's vocabulary of {cfg.vocab_size}: "
                "the tokenizer's vocab.txt and the model's vocab_size disagree."
            )
        if token_type_ids is not None and token_type_ids.numel() and int(token_type_ids.max()) >= max(1, cfg.type_vocab_size):
            if cfg.type_vocab_size == 0:
                raise ValueError("this model has no segment embeddings (type_vocab_size=0, as DistilBERT): "
                                 "pass token_type_ids=None, or all zeros")
            raise ValueError(f"token_type_ids must be below type_vocab_size={cfg.type_vocab_size}")
