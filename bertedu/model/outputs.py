"""The small dataclasses models return: attribute access, extras only when asked."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch


@dataclass
class BertModelOutput:
    last_hidden_state: torch.Tensor  # (B, T, D)
    pooler_output: torch.Tensor  # (B, D)
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None  # L + 1 of (B, T, D), embeddings first
    attentions: Optional[tuple[torch.Tensor, ...]] = None  # L of (B, N, T, T)


@dataclass
class BertPreTrainingOutput:
    mlm_logits: torch.Tensor  # (B, T, V); (M, V) on the sparse-MLM fast path
    nsp_logits: torch.Tensor  # (B, 2)
    loss: Optional[torch.Tensor] = None  # mlm_loss + nsp_loss, when labels are given
    mlm_loss: Optional[torch.Tensor] = None
    nsp_loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None
    mlm_labels: Optional[torch.Tensor] = None  # (M,): the labels of sparse mlm_logits' rows


@dataclass
class MaskedLMOutput:
    """An MLM-only model's output (RoBERTa, DistilBERT: no sentence-level objective)."""

    mlm_logits: torch.Tensor  # (B, T, V); (M, V) on the sparse-MLM fast path
    loss: Optional[torch.Tensor] = None  # the MLM loss, when labels are given
    mlm_loss: Optional[torch.Tensor] = None  # the same tensor, under BertPreTrainingOutput's name
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None
    mlm_labels: Optional[torch.Tensor] = None  # (M,): the labels of sparse mlm_logits' rows


@dataclass
class AlbertPreTrainingOutput:
    """ALBERT's pretraining output: sentence-order prediction (SOP) where BERT has NSP."""

    mlm_logits: torch.Tensor  # (B, T, V); (M, V) on the sparse-MLM fast path
    sop_logits: torch.Tensor  # (B, 2): 0 = segments in their original order, 1 = swapped
    loss: Optional[torch.Tensor] = None  # mlm_loss + sop_loss, when labels are given
    mlm_loss: Optional[torch.Tensor] = None
    sop_loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None
    mlm_labels: Optional[torch.Tensor] = None


# The fine-tuning heads' outputs (bertedu.model.tasks).
@dataclass
class SequenceClassifierOutput:
    logits: torch.Tensor  # (B, C); (B, 1) for regression
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None


@dataclass
class TokenClassifierOutput:
    logits: torch.Tensor  # (B, T, C)
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None
    tags: Optional[torch.Tensor] = None  # (B, T) a CRF head's Viterbi tag ids (eval mode), -100 off the words


@dataclass
class QuestionAnsweringOutput:
    start_logits: torch.Tensor  # (B, T)
    end_logits: torch.Tensor  # (B, T)
    loss: Optional[torch.Tensor] = None
    hidden_states: Optional[tuple[torch.Tensor, ...]] = None
    attentions: Optional[tuple[torch.Tensor, ...]] = None
