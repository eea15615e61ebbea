"""A decoder-only language model built from BERT's own blocks: GPT, to set against BERT.

Introduced in notebook 17. OpenAI's GPT (Radford et al. 2018, "Improving Language
Understanding by Generative Pre-Training") is a Transformer whose every token attends only
to itself and the tokens before it, trained to predict the next token. BERT-BASE was sized
to match it (Devlin et al. 2019, section 3: "BERT-BASE was chosen to have the same model
size as OpenAI GPT for comparison purposes"). So the network here is BERT's, piece for piece:

    embeddings   `BertEmbeddings` (token + learned position; no segments: type_vocab_size=0)
    layers       `BertLayer`s, post-LayerNorm as in GPT-1, with a *causal* mask:
                 token t sees tokens 0..t (`bertedu.model.attention.causal_mask`)
    head         `BertMLMHead` (dense, GELU, LayerNorm, decoder tied to the word embeddings)
                 reading every position; the logits at t score token t + 1

    loss = mean over t of -log p(x_{t+1} | x_0..x_t)        (`causal_lm_loss`)

Deliberate deviations from GPT-1: the embeddings end in a LayerNorm (BERT's), and the
output head has BERT's extra dense + GELU + LayerNorm and a bias (GPT-1 multiplies by the
embedding matrix directly). With them, `CausalLM` and `BertForMaskedLM` of one config have
the same weights but the segment table, so the two differ only in the mask and the task.
`generate` recomputes the whole prefix for each new token (no key/value cache): quadratic,
and easy to read.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..model.attention import causal_mask, padding_mask
from ..model.config import BertConfig
from ..model.constants import IGNORE_INDEX
from ..model.encoder import BertModel
from ..model.heads import BertMLMHead, init_head_layers


@dataclass(frozen=True)
class GPTConfig(BertConfig):
    """`BertConfig` for a decoder: one segment only, so no segment table (type_vocab_size=0).

    Presets as BERT's: `GPTConfig.tiny(vocab_size=...)`, ..., `GPTConfig.base()` (GPT-1's size).
    """

    type_vocab_size: int = 0


@dataclass
class CausalLMOutput:
    logits: torch.Tensor  # (B, T, V): at position t, the scores of token t + 1
    loss: Optional[torch.Tensor] = None  # `causal_lm_loss`, when labels are given
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None  # L + 1 of (B, T, D)
    attentions: Optional[tuple[torch.Tensor, ...]] = None  # L of (B, N, T, T), zero above the diagonal


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Next-token cross-entropy, in fp32: position t's logits against label t + 1.

    logits (B, T, V), labels (B, T): usually the input ids, with IGNORE_INDEX (-100) where
    no prediction is wanted (padding). The mean runs over the B x (T - 1) shifted pairs
    whose label is not -100.
    """
    shifted_logits = logits[:, :-1]  # (B, T-1, V): the predictions of tokens 1..T-1
    shifted_labels = labels[:, 1:]  # (B, T-1)
    return F.cross_entropy(shifted_logits.flatten(0, 1).float(), shifted_labels.flatten(), ignore_index=IGNORE_INDEX)


class GPTModel(BertModel):
    """`BertModel` without a pooler whose attention is causal.

    forward(input_ids (B, T), attention_mask (B, T) = None, ...) -> (last_hidden_state (B, T, D),
    hidden_states, attentions). Padding goes on the right; a causal mask already keeps real
    tokens from seeing it.
    """

    def __init__(self, config: BertConfig):
        super().__init__(config, add_pooler=False)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ):
        if input_ids.dim() != 2:
            raise ValueError(f"input_ids must be (batch, tokens), got shape {tuple(input_ids.shape)}")
        T = input_ids.size(1)
        # The one change from BERT: query t may attend to keys 0..t only.
        mask = causal_mask(T, input_ids.device)[None, None]  # (1, 1, T, T)
        if attention_mask is not None:
            mask = mask & padding_mask(attention_mask)  # (B, 1, T, T): nor to padding
        x = self.embeddings(input_ids)  # (B, T, D)
        hidden_states = [x] if output_hidden_states else None
        attentions = [] if output_attentions else None
        for layer in self.layers:
            x, probs = layer(x, mask, need_probs=output_attentions)  # (B, T, D)
            if output_hidden_states:
                hidden_states.append(x)
            if output_attentions:
                attentions.append(probs)
        return (x, tuple(hidden_states) if output_hidden_states else None,
                tuple(attentions) if output_attentions else None)


class CausalLM(nn.Module):
    """`GPTModel` with a next-token head tied to the word embeddings.

    forward(input_ids (B, T), attention_mask (B, T) = None, labels (B, T) = None,
            output_hidden_states=False, output_attentions=False) -> CausalLMOutput
    labels: the ids to predict, not yet shifted (pass input_ids, -100 on padding); the
    loss shifts them (`causal_lm_loss`).
    """

    def __init__(self, config: BertConfig):
        super().__init__()
        self.config = config
        self.gpt = GPTModel(config)
        self.lm_head = BertMLMHead(config, self.gpt.embeddings.word_embeddings)
        init_head_layers(config, self.lm_head)

    def forward(
        self,
        input_ids: torch.Tensor,
        attention_mask: Optional[torch.Tensor] = None,
        labels: Optional[torch.Tensor] = None,
        *,
        output_hidden_states: bool = False,
        output_attentions: bool = False,
    ) -> CausalLMOutput:
        x, hidden_states, attentions = self.gpt(
            input_ids, attention_mask, output_hidden_states=output_hidden_states, output_attentions=output_attentions)
        logits = self.lm_head(x)  # (B, T, V)
        loss = None if labels is None else causal_lm_loss(logits, labels)
        return CausalLMOutput(logits=logits, loss=loss, hidden_states=hidden_states, attentions=attentions)

    @torch.no_grad()
    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int,
        *,
        top_k: Optional[int] = 1,
        temperature: float = 1.0,
        generator: Optional[torch.Generator] = None,
        banned_ids: tuple[int, ...] = (),
        eos_token_id: Optional[int] = None,
    ) -> torch.Tensor:
        """Left to right: append one token at a time, each drawn from p(next | all before).

        input_ids (B, T) -> (B, T + new), new <= max_new_tokens (fewer when every row has
        produced eos_token_id; a row that has keeps repeating it). The rows are prompts of
        one length, without padding: new tokens go after position T - 1 of every row.
        top_k=1: greedy, the most likely token every time; top_k=k > 1: sample among the k
        most likely, renormalised; top_k=None: sample from the whole distribution.
        temperature divides the logits before sampling; banned_ids are never produced
        (e.g. [PAD], [MASK]). Only the last max_position_embeddings tokens are read.
        """
        if top_k is not None and top_k < 1:
            raise ValueError(f"top_k must be at least 1 (1 = greedy) or None, got {top_k}")
        if temperature <= 0:
            raise ValueError(f"temperature must be positive, got {temperature}")
        was_training = self.training
        self.eval()  # no dropout while generating
        ids = input_ids
        done = torch.zeros(ids.size(0), dtype=torch.bool, device=ids.device)
        for _ in range(max_new_tokens):
            context = ids[:, -self.config.max_position_embeddings:]  # (B, <= P)
            logits = self(context).logits[:, -1].float() / temperature  # (B, V): scores of the next token
            if banned_ids:
                logits[:, list(banned_ids)] = float("-inf")
            if top_k == 1:
                next_id = logits.argmax(-1)  # (B,)
            else:
                if top_k is not None:
                    kth = logits.topk(min(top_k, logits.size(-1)), dim=-1).values[:, -1:]  # (B, 1)
                    logits = logits.masked_fill(logits < kth, float("-inf"))  # keep the k best
                next_id = torch.multinomial(logits.softmax(-1), 1, generator=generator)[:, 0]  # (B,)
            if eos_token_id is not None:
                next_id = next_id.masked_fill(done, eos_token_id)
                done |= next_id == eos_token_id
            ids = torch.cat([ids, next_id[:, None]], dim=1)  # (B, T + 1)
            if eos_token_id is not None and bool(done.all()):
                break
        self.train(was_training)
        return ids

    def num_parameters(self) -> int:
        return sum(p.numel() for p in self.parameters())  # the tied matrix counts once
