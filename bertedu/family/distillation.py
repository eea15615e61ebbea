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

TinyBERT (Jiao et al. 2020) distils layer by layer instead, the second recipe here
(`tinybert_layer_loss`): student layer m learns teacher layer g(m) = m * L_t / L_s
(`uniform_layer_map`), by MSE between hidden states (through a learned projection W_h when
the widths differ) and between attention maps.

The teacher is a fixed target: its logits, hidden states and attention maps are detached here.
The student's architecture and its initialisation from the teacher are `bertedu.family.distilbert`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import torch
import torch.nn.functional as F
from torch import nn

from ..model.constants import IGNORE_INDEX
from ..model.heads import masked_lm_loss
from ..model.outputs import MaskedLMOutput


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


# ---- TinyBERT's layer-wise losses -------------------------------------------------------


def uniform_layer_map(student_layers: int, teacher_layers: int) -> list[int]:
    """TinyBERT's g(m) = m * L_t / L_s for m = 0..L_s: hidden state m of the student (0 being
    the embeddings) learns from hidden state g(m) of the teacher. (4, 12) -> [0, 3, 6, 9, 12]."""
    if student_layers < 1 or teacher_layers % student_layers:
        raise ValueError(f"the teacher's {teacher_layers} layers must be a multiple of the student's {student_layers}")
    k = teacher_layers // student_layers
    return [m * k for m in range(student_layers + 1)]


class HiddenProjection(nn.Module):
    """TinyBERT's W_h: student hidden states (..., D_s) -> the teacher's width (..., D_t).

    Trained with the student (put its parameters in the optimiser) and thrown away after.
    """

    def __init__(self, student_width: int, teacher_width: int):
        super().__init__()
        self.proj = nn.Linear(student_width, teacher_width)

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        return self.proj(hidden)  # (..., D_t)


@dataclass
class LayerwiseLoss:
    loss: torch.Tensor  # hidden + attention
    hidden: torch.Tensor
    attention: torch.Tensor


def tinybert_layer_loss(
    student_hidden: tuple[torch.Tensor, ...],
    teacher_hidden: tuple[torch.Tensor, ...],
    student_attentions: tuple[torch.Tensor, ...],
    teacher_attentions: tuple[torch.Tensor, ...],
    projection: Optional[nn.Module] = None,
    attention_mask: Optional[torch.Tensor] = None,
) -> LayerwiseLoss:
    """TinyBERT's intermediate-layer loss, summed over the mapped layers.

    student_hidden (L_s + 1 of (B, T, D_s)), teacher_hidden (L_t + 1 of (B, T, D_t)): the
    models' `hidden_states`, embeddings first; student/teacher_attentions (L of (B, N, T, T)):
    their `attentions`, the same number of heads N. projection: `HiddenProjection` when
    D_s != D_t. attention_mask (B, T): only real tokens (query rows) count.

        hidden     sum over m = 0..L_s of MSE(W_h h_s[m], h_t[g(m)])   (m = 0: the embeddings)
        attention  sum over m = 1..L_s of MSE(A_s[m], A_t[g(m)]), averaged over heads

    Deliberate deviation: TinyBERT compares the attention scores before softmax; bertedu's
    models return the probabilities, which are compared here (as MiniLM does, there by KL).
    """
    mapping = uniform_layer_map(len(student_hidden) - 1, len(teacher_hidden) - 1)
    if student_attentions[0].size(1) != teacher_attentions[0].size(1):
        raise ValueError(f"attention maps need the same number of heads: student {student_attentions[0].size(1)}, "
                         f"teacher {teacher_attentions[0].size(1)}")
    real = None if attention_mask is None else attention_mask.bool()
    project = projection if projection is not None else (lambda h: h)

    def rows(x: torch.Tensor) -> torch.Tensor:  # (B, T, ...) -> (P, ...) real tokens only
        return x if real is None else x[real]

    hidden = sum(F.mse_loss(rows(project(student_hidden[m])).float(), rows(teacher_hidden[g].detach()).float())
                 for m, g in enumerate(mapping))
    attention = sum(
        F.mse_loss(rows(student_attentions[m - 1].transpose(1, 2)).float(),  # (P, N, T) query rows
                   rows(teacher_attentions[g - 1].detach().transpose(1, 2)).float())
        for m, g in enumerate(mapping) if m > 0
    )
    return LayerwiseLoss(loss=hidden + attention, hidden=hidden, attention=attention)


# ---- distillation while fine-tuning (`bertedu finetune --teacher`) ----------------------------


class _LearnsFromTeacher:
    """Mixed into a task model's class (`learn_from_teacher`): in training, the loss becomes
    (1 - a) * cross-entropy on the labels + a * T^2 KL to the fine-tuned teacher's softened
    predictions on the same batch (per example for classification, per real token for tagging),
    plus, when the layer weight b > 0, b * TinyBERT's intermediate-layer loss to the same teacher
    (`tinybert_layer_loss`: hidden states and attention maps of the mapped layers, real tokens;
    the student must have the teacher's width and number of heads).
    The teacher is held outside the module tree, so checkpoints are the student's alone."""

    def forward(self, input_ids, token_type_ids=None, attention_mask=None, labels=None, **kwargs):
        training = labels is not None and self.training
        layers = training and self.layer_weight > 0
        if layers:  # the layer loss needs both models' hidden states and attention maps
            kwargs = {**kwargs, "output_hidden_states": True, "output_attentions": True}
        out = super().forward(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                              labels=labels, **kwargs)
        if not training:
            return out  # evaluation and prediction: the student alone
        teacher = self.task_teacher
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        with torch.no_grad():
            taught = teacher(input_ids, token_type_ids=token_type_ids, attention_mask=attention_mask,
                             output_hidden_states=layers, output_attentions=layers)
        mask = attention_mask if out.logits.dim() == 3 and attention_mask is not None else None
        soft = soft_target_loss(out.logits, taught.logits, self.soft_temperature, mask)
        out.loss = (1 - self.soft_weight) * out.loss + self.soft_weight * soft
        if layers:
            layer = tinybert_layer_loss(out.hidden_states, taught.hidden_states, out.attentions, taught.attentions,
                                        attention_mask=attention_mask)
            out.loss = out.loss + self.layer_weight * layer.loss
        return out


def learn_from_teacher(model, teacher, soft_weight: float, temperature: float, layer_weight: float = 0.0):
    """Give the task model `model` the soft-target loss to `teacher` (same kind of task model,
    same labels) while training, and with `layer_weight` > 0 the layer-wise loss too;
    `detach_task_teacher` takes them away. Returns `model`."""
    if layer_weight > 0:
        s, t = model.config, teacher.config
        if (s.hidden_size, s.num_attention_heads) != (t.hidden_size, t.num_attention_heads):
            raise ValueError(f"the layer-wise loss compares hidden states and attention maps as they are: the "
                             f"student (hidden {s.hidden_size}, {s.num_attention_heads} heads) needs the teacher's "
                             f"width and heads (hidden {t.hidden_size}, {t.num_attention_heads} heads)")
        uniform_layer_map(s.num_hidden_layers, t.num_hidden_layers)  # raises unless the layers map
    base = type(model)
    model.__class__ = type(f"{base.__name__}LearningFromTeacher", (_LearnsFromTeacher, base), {})
    object.__setattr__(model, "task_teacher", teacher.eval().requires_grad_(False))
    model.soft_weight, model.soft_temperature, model.layer_weight = soft_weight, temperature, layer_weight
    return model


def detach_task_teacher(model) -> None:
    """Undo `learn_from_teacher`: the model's own class again, no teacher held."""
    if isinstance(model, _LearnsFromTeacher):
        model.__class__ = model.__class__.__mro__[2]
        for name in ("task_teacher", "soft_weight", "soft_temperature", "layer_weight"):
            model.__dict__.pop(name, None)


# ---- soft targets against hard labels on the masked positions (notebook 18) ---------------


def masked_position_logits(model: nn.Module, input_ids: torch.Tensor, labels: torch.Tensor,
                           attention_mask: Optional[torch.Tensor] = None) -> torch.Tensor:
    """The MLM head's logits at the masked positions only: (M, V), in reading order.

    model: a masked LM with `.bert` and `.mlm` (BertForPreTraining, DistilBertForMaskedLM);
    input_ids, labels, attention_mask (B, T); labels != -100 marks the M masked positions.
    The head runs on those rows alone, so its cost follows M, not B * T. Introduced in notebook 18.
    """
    hidden = model.bert(input_ids, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
    return model.mlm(hidden[labels != IGNORE_INDEX])  # (M, V)


class MaskedLMStudent(nn.Module):
    """A masked-LM student that learns on the masked positions from hard labels or soft targets.

    teacher None: cross-entropy against the true tokens (hard labels). With a teacher:
    `soft_target_loss` to the teacher's distribution at the same masked positions of the same
    input, softened by `temperature`; the labels then only say which positions count, so
    both ways learn from the same positions of the same batches (notebook 18).
    The teacher is held outside the module tree: `parameters()` are the student's alone.
    forward(input_ids, attention_mask=None, labels=None) -> MaskedLMOutput, mlm_logits (M, V).
    """

    def __init__(self, student: nn.Module, teacher: Optional[nn.Module] = None, temperature: float = 2.0):
        super().__init__()
        self.student = student
        object.__setattr__(self, "teacher", None if teacher is None else teacher.eval().requires_grad_(False))
        self.temperature = temperature

    def forward(self, input_ids, attention_mask=None, labels=None, **_) -> MaskedLMOutput:
        logits = masked_position_logits(self.student, input_ids, labels, attention_mask)  # (M, V)
        targets = labels[labels != IGNORE_INDEX]  # (M,)
        if self.teacher is None:
            loss = masked_lm_loss(logits, targets)
        else:
            with torch.no_grad():
                taught = masked_position_logits(self.teacher, input_ids, labels, attention_mask)  # (M, V)
            loss = soft_target_loss(logits, taught, self.temperature)
        return MaskedLMOutput(mlm_logits=logits, loss=loss, mlm_loss=loss, mlm_labels=targets)
