"""The Transformer encoder as BERT uses it, and `BertModel`.

Introduced in notebook 04. One encoder layer (post-LayerNorm, as in the original BERT):

    x = LayerNorm(x + Dropout(MultiHeadSelfAttention(x)))
    x = LayerNorm(x + Dropout(FeedForward(x)))          FeedForward = W2 GELU(W1 x)

`BertModel` = embeddings -> L encoder layers -> pooler, where the pooler is
tanh(dense(hidden state of [CLS])), the sentence vector NSP and classifiers read.
"""

from __future__ import annotations

from typing import Optional

import torch
from torch import nn

from .activations import activation
from .attention import ATTENTION_KERNELS, MultiHeadSelfAttention, padding_mask
from .config import BertConfig
from .embeddings import BertEmbeddings
from .outputs import BertModelOutput


class FeedForward(nn.Module):
    """Position-wise: each token's vector goes D -> 4D -> D on its own."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense_in = nn.Linear(config.hidden_size, config.intermediate_size)
        self.dense_out = nn.Linear(config.intermediate_size, config.hidden_size)
        self.act = activation(config.hidden_act)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dense_out(self.act(self.dense_in(x)))  # (B, T, 4D) -> (B, T, D)


class BertLayer(nn.Module):
    """One post-LayerNorm encoder layer: attention sub-layer, then feed-forward sub-layer."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.attention = MultiHeadSelfAttention(config)
        self.attention_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.feed_forward = FeedForward(config)
        self.output_norm = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_eps)
        self.dropout = nn.Dropout(config.hidden_dropout_prob)

    def forward(
        self, x: torch.Tensor, mask: Optional[torch.Tensor] = None, need_probs: bool = False
    ) -> tuple[torch.Tensor, Optional[torch.Tensor]]:
        a, probs = self.attention(x, mask, need_probs)  # (B, T, D), (B, N, T, T) or None
        return self.feed_forward_block(self.attention_residual(x, a)), probs

    # The two residual blocks, each "sub-layer, dropout, add, LayerNorm" (post-LN). They act
    # on each token's vector alone, so the fast path calls them on real tokens only.
    def attention_residual(self, x: torch.Tensor, a: torch.Tensor) -> torch.Tensor:
        """x, attention output a: (..., D) -> LayerNorm(x + Dropout(a)), (..., D)."""
        return self.attention_norm(x + self.dropout(a))

    def feed_forward_block(self, x: torch.Tensor) -> torch.Tensor:
        """x (..., D) -> LayerNorm(x + Dropout(FeedForward(x))), (..., D)."""
        return self.output_norm(x + self.dropout(self.feed_forward(x)))


class BertPooler(nn.Module):
    """The [CLS] vector through dense + tanh: one (D,) vector per sequence."""

    def __init__(self, config: BertConfig):
        super().__init__()
        self.dense = nn.Linear(config.hidden_size, config.hidden_size)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.pool(hidden[:, 0])  # (B, D) from position 0, [CLS]

    def pool(self, cls: torch.Tensor) -> torch.Tensor:
        """The [CLS] vectors (B, D) -> tanh(dense(cls)), (B, D)."""
        return torch.tanh(self.dense(cls))


def init_bert_weights(module: nn.Module, initializer_range: float) -> None:
    """BERT's initialisation: N(0, 0.02) weights, zero biases, LayerNorm at identity."""
    if isinstance(module, nn.Linear):
        nn.init.normal_(module.weight, mean=0.0, std=initializer_range)
        if module.bias is not None:
            nn.init.zeros_(module.bias)
    elif isinstance(module, nn.Embedding):
        # weight[:num_embeddings]: all of it, except a padded vocabulary's extra rows, which stay
        # zero (bertedu.model.embeddings.word_embedding_table)
        nn.init.normal_(module.weight[: module.num_embeddings], mean=0.0, std=initializer_range)
        if module.padding_idx is not None:
            with torch.no_grad():
                module.weight[module.padding_idx].zero_()
    elif isinstance(module, nn.LayerNorm):
        nn.init.ones_(module.weight)
        nn.init.zeros_(module.bias)


class BertModel(nn.Module):
    """Embeddings -> encoder stack -> pooler.

    forward(input_ids (B, T), token_type_ids (B, T) = None, attention_mask (B, T) = None,
            output_hidden_states=False, output_attentions=False) -> BertModelOutput
    attention_mask: 1 = real token, 0 = padding (None: every token is real).
    """

    def __init__(self, config: BertConfig, add_pooler: bool = True):
        super().__init__()
        self.config = config
        self.embeddings = self.build_embeddings(config)
        self.layers = self.build_layers(config)
        self.pooler = BertPooler(config) if add_pooler else None
        self.apply(lambda m: init_bert_weights(m, config.initializer_range))

    # What the model is built from; a variant (bertedu.family.roberta, .albert, .distilbert)
    # overrides these and keeps the forward below.
    def build_embeddings(self, config: BertConfig) -> nn.Module:
        """input_ids (B, T), token_type_ids (B, T) -> (B, T, D)."""
        return BertEmbeddings(config)

    def build_layers(self, config: BertConfig) -> nn.Module:
        """The encoder stack: iterating it gives the layers in order."""
        return nn.ModuleList(BertLayer(config) for _ in range(config.num_hidden_layers))

    def set_attn_implementation(self, name: str) -> None:
        """Switch every layer's attention kernel ("reference" or "sdpa"); weights are untouched."""
        if name not in ATTENTION_KERNELS:
            raise ValueError(f"unknown attention kernel {name!r}; choose one of {list(ATTENTION_KERNELS)}")
        for layer in self.layers:
            layer.attention.kernel = name

    def forward(
        self,
        input_ids: torch.Tensor,
        token_type_ids: Optional[torch.Tensor] = None,
        attention_mask: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> BertModelOutput:
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
        if attention_mask is not None and attention_mask.shape != input_ids.shape:
            raise ValueError(f"attention_mask {tuple(attention_mask.shape)} must match input_ids {tuple(input_ids.shape)}")
        mask = None if attention_mask is None else padding_mask(attention_mask)  # (B, 1, 1, T)
        x = self.embeddings(input_ids, token_type_ids)  # (B, T, D)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, mask, need_probs=output_attentions)  # (B, T, D)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(probs)
        return BertModelOutput(
            last_hidden_state=x,
            pooler_output=self.pooler(x) if self.pooler is not None else None,
            hidden_states=tuple(hidden_states) if output_hidden_states else None,
            attentions=tuple(attentions) if output_attentions else None,
        )

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())
