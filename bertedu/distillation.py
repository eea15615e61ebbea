"""Knowledge distillation losses: DistilBERT's triple loss (Sanh et al. 2019, section 3).

A student learns from the teacher's whole output distribution, not only the one right
token. With temperature T, both models' logits are softened, p = softmax(z / T), and

    soft     T^2 * KL(p_teacher || p_student)        Hinton et al. 2015, "dark knowledge"
    mlm      cross-entropy against the masked tokens  the ordinary MLM loss
    cosine   mean over tokens of 1 - cos(h_student, h_teacher), last hidden states

    loss = w_soft * soft + w_mlm * mlm + w_cos * cosine      (DistilBERT: 5, 2, 1; T = 2)

Why T^2: the gradient of KL(p_t^T || p_s^T) with respect to the student's logits is
(p_s^T - p_t^T) / T, and for large T the difference p_s^T - p_t^T itself shrinks like 1/T;
multiplying by T^2 keeps the soft term's gradients the same size whatever T, so the
weights above need no retuning when T changes (tests/test_distillation.py checks this).

The teacher is a fixed target: its logits and hidden states are detached here.
The student's architecture and its initialisation from the teacher are `bertedu.distilbert`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F

from .heads import masked_lm_loss


def soft_target_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    temperature: float = 2.0,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """T^2 * KL(softmax(teacher / T) || softmax(student / T)), averaged over positions.

    student_logits, teacher_logits: (..., V), e.g. (B, T, V); mask (...) bool, e.g. the
    attention mask: only these positions count (padding has no target). Computed in fp32.
    """
    if temperature <= 0:
        raise ValueError(f"temperature must be positive, got {temperature}")
    s, t = student_logits, teacher_logits.detach()
    if mask is not None:
        s, t = s[mask.bool()], t[mask.bool()]  # (P, V) the positions that count
    s = s.flatten(0, -2).float() / temperature  # (P, V)
    t = t.flatten(0, -2).float() / temperature
    # kl_div(input=log q, target=log p) = sum p (log p - log q); "batchmean" divides by P
    kl = F.kl_div(s.log_softmax(-1), t.log_softmax(-1), log_target=True, reduction="batchmean")
    return kl * temperature ** 2


def hidden_cosine_loss(
    student_hidden: torch.Tensor,
    teacher_hidden: torch.Tensor,
    mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Mean over tokens of 1 - cos(h_student, h_teacher): 0 when aligned, 2 when opposite.

    student_hidden, teacher_hidden: (..., D) of the same width; mask (...) bool: the
    positions that count (real tokens).
    """
    s, t = student_hidden, teacher_hidden.detach()
    if mask is not None:
        s, t = s[mask.bool()], t[mask.bool()]  # (P, D)
    return (1.0 - F.cosine_similarity(s.float(), t.float(), dim=-1)).mean()


@dataclass(frozen=True)
class DistillationWeights:
    """The triple loss's weights and temperature; the defaults are DistilBERT's."""

    soft: float = 5.0
    mlm: float = 2.0
    cosine: float = 1.0
    temperature: float = 2.0


@dataclass
class DistillationLoss:
    loss: torch.Tensor  # the weighted sum
    soft: torch.Tensor
    mlm: Optional[torch.Tensor]
    cosine: Optional[torch.Tensor]


def distillation_loss(
    student_logits: torch.Tensor,
    teacher_logits: torch.Tensor,
    labels: Optional[torch.Tensor] = None,
    student_hidden: Optional[torch.Tensor] = None,
    teacher_hidden: Optional[torch.Tensor] = None,
    attention_mask: Optional[torch.Tensor] = None,
    weights: DistillationWeights = DistillationWeights(),
) -> DistillationLoss:
    """DistilBERT's triple loss; each of the last two parts only when its inputs are given.

    student_logits, teacher_logits (B, T, V); labels (B, T), -100 where unmasked;
    student_hidden, teacher_hidden (B, T, D); attention_mask (B, T), 1 = real token:
    the soft and cosine terms average over real tokens.
    """
    mask = None if attention_mask is None else attention_mask.bool()
    soft = soft_target_loss(student_logits, teacher_logits, weights.temperature, mask)
    loss = weights.soft * soft
    mlm = cosine = None
    if labels is not None:
        mlm = masked_lm_loss(student_logits, labels)
        loss = loss + weights.mlm * mlm
    if student_hidden is not None and teacher_hidden is not None:
        cosine = hidden_cosine_loss(student_hidden, teacher_hidden, mask)
        loss = loss + weights.cosine * cosine
    return DistillationLoss(loss=loss, soft=soft, mlm=mlm, cosine=cosine)
