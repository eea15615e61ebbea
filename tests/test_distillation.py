"""The distillation losses and the DistilBERT student's initialisation from its teacher."""

import math

import pytest
import torch

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.family.distilbert import DistilBertForMaskedLM, DistilBertModel, student_from_teacher
from bertedu.family.distillation import (
    DistillationWeights,
    distillation_loss,
    hidden_cosine_loss,
    soft_target_loss,
)
from bertedu.model.heads import masked_lm_loss


def logits(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


def test_soft_loss_is_zero_when_the_student_is_the_teacher_and_positive_otherwise():
    t = logits(2, 5, 11)
    assert soft_target_loss(t.clone(), t, temperature=2.0).abs().item() < 1e-6
    assert soft_target_loss(logits(2, 5, 11, seed=1), t, temperature=2.0).item() > 0.01


def test_soft_loss_is_t_squared_times_the_kl_written_out():
    s, t, T = logits(3, 4, 7, seed=1), logits(3, 4, 7, seed=2), 3.0
    p_t, p_s = (t / T).softmax(-1), (s / T).softmax(-1)
    kl = (p_t * (p_t.log() - p_s.log())).sum(-1).mean()  # KL(teacher || student) per position, averaged
    torch.testing.assert_close(soft_target_loss(s, t, T), T ** 2 * kl)


def test_t_squared_keeps_the_gradient_the_same_size_at_any_temperature():
    t = logits(4, 13, seed=2)
    norms = []
    for T in (25.0, 50.0, 100.0):
        s = logits(4, 13, seed=3).requires_grad_()
        soft_target_loss(s, t, T).backward()
        norms.append(s.grad.norm().item())
    # without the T^2 factor each doubling of T would divide the gradient by about 4
    assert norms[1] / norms[0] == pytest.approx(1.0, abs=0.03)
    assert norms[2] / norms[1] == pytest.approx(1.0, abs=0.03)


def test_soft_loss_counts_only_masked_in_positions_and_leaves_the_teacher_alone():
    s, t = logits(2, 3, 5, seed=4).requires_grad_(), logits(2, 3, 5, seed=5).requires_grad_()
    mask = torch.tensor([[1, 1, 0], [1, 0, 0]])
    junk = s.detach().clone()
    junk[mask == 0] = 100.0  # whatever sits at padding changes nothing
    a = soft_target_loss(s, t, 2.0, mask)
    torch.testing.assert_close(a, soft_target_loss(junk, t, 2.0, mask))
    a.backward()
    assert t.grad is None and s.grad[mask == 0].abs().sum() == 0


def test_cosine_loss_is_zero_aligned_two_opposite_and_ignores_length():
    h = logits(2, 4, 6, seed=6)
    assert hidden_cosine_loss(3.0 * h, h).abs().item() < 1e-6
    torch.testing.assert_close(hidden_cosine_loss(-h, h), torch.tensor(2.0))
    mask = torch.tensor([[1, 1, 0, 0], [1, 1, 1, 0]])
    other = h.clone()
    other[mask == 0] = -h[mask == 0]  # disagreeing only at padding
    assert hidden_cosine_loss(other, h, mask).abs().item() < 1e-6


def test_the_triple_loss_is_the_weighted_sum_of_its_parts():
    s, t = logits(2, 4, 9, seed=7), logits(2, 4, 9, seed=8)
    hs, ht = logits(2, 4, 6, seed=9), logits(2, 4, 6, seed=10)
    labels = torch.tensor([[3, -100, -100, 5], [-100, 1, -100, -100]])
    mask = torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]])
    w = DistillationWeights(soft=5.0, mlm=2.0, cosine=1.0, temperature=2.0)
    out = distillation_loss(s, t, labels, hs, ht, mask, w)
    torch.testing.assert_close(out.soft, soft_target_loss(s, t, 2.0, mask.bool()))
    torch.testing.assert_close(out.mlm, masked_lm_loss(s, labels))
    torch.testing.assert_close(out.cosine, hidden_cosine_loss(hs, ht, mask.bool()))
    torch.testing.assert_close(out.loss, 5.0 * out.soft + 2.0 * out.mlm + 1.0 * out.cosine)
    only_soft = distillation_loss(s, t)
    assert only_soft.mlm is None and only_soft.cosine is None
    assert not math.isclose(only_soft.loss.item(), out.loss.item())


# ---- the student's initialisation ----------------------------------------------------------

def teacher(num_layers=4):
    torch.manual_seed(5)
    model = BertForPreTraining(BertConfig.tiny(num_hidden_layers=num_layers, vocab_size=90)).eval()
    with torch.no_grad():  # non-default values everywhere, so a missed copy shows
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


def test_student_keeps_every_other_teacher_layer():
    t = teacher(4)
    s = student_from_teacher(t)
    assert isinstance(s, DistilBertForMaskedLM) and s.config.num_hidden_layers == 2
    for j, i in enumerate((0, 2)):
        for (name, a), b in zip(s.bert.layers[j].state_dict().items(), t.bert.layers[i].state_dict().values()):
            assert torch.equal(a, b), (j, name)
    assert s.bert.embeddings.token_type_embeddings is None and s.bert.pooler is None
    assert s.mlm.decoder.weight is s.bert.embeddings.word_embeddings.weight
    assert s.mlm.decoder.weight.data_ptr() != t.mlm.decoder.weight.data_ptr()  # copied, not shared
    assert isinstance(student_from_teacher(t.bert), DistilBertModel)


def test_a_student_keeping_all_layers_computes_the_teacher_on_one_segment():
    """Segment A's vector is folded into the positions, so nothing is lost on single-segment input."""
    t = teacher(3)
    s = student_from_teacher(t, layers=[0, 1, 2])
    ids = torch.randint(1, 90, (2, 9))
    mask = torch.ones_like(ids)
    mask[1, 6:] = 0
    with torch.no_grad():
        torch.testing.assert_close(s(ids, attention_mask=mask).mlm_logits, t(ids, attention_mask=mask).mlm_logits,
                                   atol=1e-5, rtol=1e-5)
    with torch.no_grad():  # and the kept-half student differs from the teacher, as it should
        half = student_from_teacher(t)(ids, attention_mask=mask).mlm_logits
    assert not torch.allclose(half, t(ids, attention_mask=mask).mlm_logits, atol=1e-3)


def test_student_from_teacher_rejects_what_it_cannot_take():
    with pytest.raises(ValueError, match="teacher layer indices"):
        student_from_teacher(teacher(2), layers=[0, 5])
    from bertedu.family.albert import AlbertConfig, AlbertModel

    with pytest.raises(TypeError, match="ALBERT"):
        student_from_teacher(AlbertModel(AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=16,
                                                      num_hidden_layers=2, num_attention_heads=2,
                                                      intermediate_size=32)))


def test_the_distillation_loss_trains_a_student_toward_its_teacher():
    """A few steps of the triple loss bring the student's predictions closer to the teacher's."""
    t = teacher(4)
    s = student_from_teacher(t)  # in eval mode like the teacher: no dropout noise in 15 steps
    ids = torch.randint(1, 90, (4, 10))
    with torch.no_grad():
        t_out = t(ids, output_hidden_states=True)
    opt = torch.optim.AdamW(s.parameters(), lr=3e-3)
    first = None
    for _ in range(15):
        out = s(ids, output_hidden_states=True)
        loss = distillation_loss(out.mlm_logits, t_out.mlm_logits, None, out.hidden_states[-1],
                                 t_out.hidden_states[-1]).loss
        first = loss.item() if first is None else first
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.5 * first


# ---- TinyBERT's layer-wise losses ----------------------------------------------------------

def test_uniform_layer_map():
    from bertedu.family.distillation import uniform_layer_map

    assert uniform_layer_map(4, 12) == [0, 3, 6, 9, 12]
    assert uniform_layer_map(3, 6) == [0, 2, 4, 6]
    with pytest.raises(ValueError, match="multiple"):
        uniform_layer_map(5, 12)


def test_layerwise_loss_is_zero_for_the_teacher_itself_and_positive_for_a_student():
    from bertedu.family.distillation import HiddenProjection, tinybert_layer_loss

    t = teacher(4)
    ids = torch.randint(1, 90, (2, 8))
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    with torch.no_grad():
        t_out = t(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    same = tinybert_layer_loss(t_out.hidden_states, t_out.hidden_states, t_out.attentions, t_out.attentions,
                               attention_mask=mask)
    assert same.loss.item() == 0.0
    # a narrower 2-layer student, through a learned projection: layers 1, 2 learn teacher layers 2, 4
    s = BertForPreTraining(BertConfig.tiny(num_hidden_layers=2, hidden_size=64, num_attention_heads=2,
                                           vocab_size=90)).eval()
    proj = HiddenProjection(64, 128)
    s_out = s(ids, attention_mask=mask, output_hidden_states=True, output_attentions=True)
    out = tinybert_layer_loss(s_out.hidden_states, t_out.hidden_states, s_out.attentions, t_out.attentions,
                              proj, mask)
    assert out.hidden.item() > 0 and out.attention.item() > 0
    torch.testing.assert_close(out.loss, out.hidden + out.attention)
    out.loss.backward()
    assert proj.proj.weight.grad.abs().sum() > 0 and s.bert.layers[1].attention.query.weight.grad is not None
    # padding rows count for nothing
    junk = tuple(h.detach().clone() for h in s_out.hidden_states)
    for h in junk:
        h[1, 5:] = 99.0
    again = tinybert_layer_loss(junk, t_out.hidden_states, s_out.attentions, t_out.attentions, proj, mask)
    torch.testing.assert_close(again.hidden, out.hidden.detach())
    with pytest.raises(ValueError, match="same number of heads"):
        tinybert_layer_loss(s_out.hidden_states, t_out.hidden_states, s_out.attentions,
                            tuple(a[:, :1] for a in t_out.attentions), proj, mask)


# ---- soft targets against hard labels on the masked positions (notebook 18) -----------------

def test_masked_position_logits_are_the_full_logits_at_the_masked_positions():
    from bertedu.family.distillation import masked_position_logits

    t = teacher(2).eval()
    ids = torch.randint(1, 90, (2, 7), generator=torch.Generator().manual_seed(0))
    labels = torch.full_like(ids, -100)
    labels[0, 2], labels[1, 5], labels[1, 1] = 4, 6, 9
    with torch.no_grad():
        full = t(ids).mlm_logits  # (B, T, V)
        rows = masked_position_logits(t, ids, labels)  # (M, V)
    assert rows.shape == (3, t.config.vocab_size)
    torch.testing.assert_close(rows, full[labels != -100])  # reading order: (0, 2), (1, 1), (1, 5)


def test_masked_lm_student_learns_hard_labels_or_the_teachers_soft_targets():
    from bertedu.family.distillation import MaskedLMStudent, masked_position_logits

    t = teacher(4).eval()
    ids = torch.randint(1, 90, (2, 8), generator=torch.Generator().manual_seed(1))
    labels = torch.full_like(ids, -100)
    labels[:, 3] = ids[:, 3]
    hard, soft = MaskedLMStudent(student_from_teacher(t).eval()), MaskedLMStudent(student_from_teacher(t).eval(), t, 3.0)
    with torch.no_grad():
        s_rows = masked_position_logits(hard.student, ids, labels)
        t_rows = masked_position_logits(t, ids, labels)
        torch.testing.assert_close(hard(ids, labels=labels).loss, masked_lm_loss(s_rows, ids[:, 3]))
        torch.testing.assert_close(soft(ids, labels=labels).loss, soft_target_loss(s_rows, t_rows, 3.0))
    # the teacher is no part of the module: only the student's parameters train, and it stays in eval mode
    assert sum(p.numel() for p in soft.parameters()) == sum(p.numel() for p in soft.student.parameters())
    soft.train()
    assert soft.student.training and not t.training
    soft(ids, labels=labels).loss.backward()
    assert all(p.grad is None for p in t.parameters())
