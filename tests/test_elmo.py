"""bertedu.family.elmo: two separate LSTM LMs, one per direction (issue 38's ELMo-style model).

A ragged batch (rows of 7, 4 and 2 real tokens, padding on the right) runs through most
tests; `hypothesis` draws the lengths and the changed position for the causal property.
"""

import math

import pytest
import torch
import torch.nn.functional as F
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bertedu import BertConfig
from bertedu.family.elmo import ELMoConfig, ELMoStyleLM, reverse_padded, row_lengths
from bertedu.model.constants import IGNORE_INDEX
from bertedu.model.heads import BertForMaskedLM

V = 30
LENGTHS = (7, 4, 2)


def tiny_elmo(**overrides) -> ELMoStyleLM:
    torch.manual_seed(0)
    config = ELMoConfig.tiny(vocab_size=V, embedding_size=16, hidden_size=24, dropout=0.0, **overrides)
    model = ELMoStyleLM(config).eval()
    with torch.no_grad():  # non-zero biases and larger embeddings, so that a slip can show
        for p in model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    return model


MODEL = tiny_elmo()


def ragged_batch(lengths=LENGTHS, seed=0):
    g = torch.Generator().manual_seed(seed)
    T = max(lengths)
    ids = torch.randint(1, V, (len(lengths), T), generator=g)
    mask = (torch.arange(T)[None] < torch.tensor(lengths)[:, None]).long()  # (B, T)
    return ids.masked_fill(mask == 0, 0), mask


def test_shapes_of_logits_losses_and_contextual_states():
    ids, mask = ragged_batch()
    out = MODEL(ids, mask, labels=ids)
    B, T = ids.shape
    assert out.forward_logits.shape == out.backward_logits.shape == (B, T, V)
    assert out.forward_loss.shape == out.backward_loss.shape == out.loss.shape == ()
    torch.testing.assert_close(out.loss, out.forward_loss + out.backward_loss)
    states = MODEL.contextual(ids, mask)
    assert states.shape == (B, T, 2 * MODEL.config.hidden_size)
    assert torch.all(states[mask == 0] == 0)  # padding: zeros
    assert MODEL.fill_middle_log_probs(ids, mask).shape == (B, T, V)
    assert MODEL(ids).loss is None


def test_reverse_padded_flips_real_tokens_only():
    x = torch.tensor([[1, 2, 3, 0, 0], [4, 5, 6, 7, 8], [9, 0, 0, 0, 0]])
    lengths = torch.tensor([3, 5, 1])
    assert reverse_padded(x, lengths).tolist() == [[3, 2, 1, 0, 0], [8, 7, 6, 5, 4], [9, 0, 0, 0, 0]]
    y = torch.randn(3, 5, 4)
    torch.testing.assert_close(reverse_padded(reverse_padded(y, lengths), lengths), y)


def test_padding_must_be_on_the_right():
    ids = torch.randint(1, V, (2, 4))
    with pytest.raises(ValueError, match="padding on the right"):
        MODEL(ids, torch.tensor([[0, 1, 1, 1], [1, 1, 1, 1]]))
    assert row_lengths(ids, torch.tensor([[1, 1, 0, 0], [1, 1, 1, 1]])).tolist() == [2, 4]


def _change(ids, rows, positions):
    changed = ids.clone()
    for b in rows:
        for t in positions:
            changed[b, t] = changed[b, t] % (V - 1) + 1  # another real token
    return changed


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(lengths=st.lists(st.integers(2, 9), min_size=1, max_size=4), data=st.data())
def test_each_direction_reads_only_its_own_side(lengths, data):
    """Forward state and logits at t: unchanged by tokens after t. Backward: by tokens before t."""
    ids, mask = ragged_batch(lengths, seed=len(lengths))
    b = data.draw(st.integers(0, len(lengths) - 1))
    n = lengths[b]
    t = data.draw(st.integers(0, n - 1))
    H = MODEL.config.hidden_size
    base, base_out = MODEL.contextual(ids, mask), MODEL(ids, mask)

    later = _change(ids, [b], range(t + 1, n))
    states, out = MODEL.contextual(later, mask), MODEL(later, mask)
    torch.testing.assert_close(states[b, : t + 1, :H], base[b, : t + 1, :H], rtol=0, atol=0)
    torch.testing.assert_close(out.forward_logits[b, : t + 1], base_out.forward_logits[b, : t + 1], rtol=0, atol=0)
    if t + 1 < n:  # the backward side does see the change
        assert (states[b, t + 1: n, H:] - base[b, t + 1: n, H:]).abs().amax() > 1e-4

    earlier = _change(ids, [b], range(0, t))
    states, out = MODEL.contextual(earlier, mask), MODEL(earlier, mask)
    torch.testing.assert_close(states[b, t:n, H:], base[b, t:n, H:], rtol=0, atol=0)
    torch.testing.assert_close(out.backward_logits[b, t:n], base_out.backward_logits[b, t:n], rtol=0, atol=0)
    if t > 0:
        assert (states[b, :t, :H] - base[b, :t, :H]).abs().amax() > 1e-4


def test_padding_never_changes_real_positions():
    ids, mask = ragged_batch()
    other_padding = ids.masked_fill(mask == 0, 5)  # different pad ids: must not matter
    batch = MODEL(other_padding, mask, labels=ids)
    torch.testing.assert_close(batch.loss, MODEL(ids, mask, labels=ids).loss, rtol=0, atol=0)
    states = MODEL.contextual(other_padding, mask)
    for b, n in enumerate(LENGTHS):  # each row alone, unpadded
        alone = MODEL(ids[b: b + 1, :n])
        torch.testing.assert_close(batch.forward_logits[b, :n], alone.forward_logits[0])
        torch.testing.assert_close(batch.backward_logits[b, :n], alone.backward_logits[0])
        torch.testing.assert_close(states[b, :n], MODEL.contextual(ids[b: b + 1, :n])[0])


def test_losses_are_the_cross_entropies_by_hand():
    ids, mask = ragged_batch()
    labels = ids.clone()
    labels[0, 3] = IGNORE_INDEX  # a real position nobody wants predicted
    out = MODEL(ids, mask, labels=labels)
    forward_terms, backward_terms = [], []
    for b, n in enumerate(LENGTHS):
        for t in range(n):
            if t + 1 < n and labels[b, t + 1] != IGNORE_INDEX:  # forward: logits at t score x_{t+1}
                forward_terms.append(-F.log_softmax(out.forward_logits[b, t], -1)[labels[b, t + 1]])
            if t >= 1 and labels[b, t - 1] != IGNORE_INDEX:  # backward: logits at t score x_{t-1}
                backward_terms.append(-F.log_softmax(out.backward_logits[b, t], -1)[labels[b, t - 1]])
    assert len(forward_terms) == len(backward_terms) == sum(n - 1 for n in LENGTHS) - 1
    torch.testing.assert_close(out.forward_loss, torch.stack(forward_terms).mean())
    torch.testing.assert_close(out.backward_loss, torch.stack(backward_terms).mean())


def test_the_two_directions_share_no_parameter():
    model = tiny_elmo()
    forward_ptrs = {p.data_ptr() for p in model.forward_lm.parameters()}
    backward_ptrs = {p.data_ptr() for p in model.backward_lm.parameters()}
    assert not forward_ptrs & backward_ptrs
    assert model.num_parameters() == 2 * sum(p.numel() for p in model.forward_lm.parameters())
    ids, mask = ragged_batch()
    model(ids, mask, labels=ids).forward_loss.backward()  # each loss trains its own LM only
    assert all(p.grad is None for p in model.backward_lm.parameters())
    assert all(p.grad is not None for p in model.forward_lm.parameters())
    # within a direction, the output matrix is the input embedding (tied)
    assert model.forward_lm.embeddings.weight.grad is not None


def test_tiny_preset_is_the_size_of_bert_tiny():
    for vocab in (1000, 8000):
        elmo = ELMoStyleLM(ELMoConfig.tiny(vocab_size=vocab)).num_parameters()
        bert = sum(p.numel() for p in BertForMaskedLM(BertConfig.tiny(vocab_size=vocab)).parameters())
        assert elmo == 130 * vocab + 479_360
        assert elmo - bert == vocab  # one more bias vector, nothing else
    with pytest.raises(ValueError, match="unknown ELMoConfig field"):
        ELMoConfig.tiny(hidden_sizes=3)
    with pytest.raises(ValueError, match="hidden_size"):
        ELMoConfig.tiny(hidden_size=0)


def test_adam_drives_both_losses_well_below_uniform():
    torch.manual_seed(0)
    model = ELMoStyleLM(ELMoConfig.tiny(vocab_size=V, embedding_size=16, hidden_size=32, num_layers=1, dropout=0.0))
    cycle = torch.tensor([3, 7, 11, 5, 19, 2, 23, 13])  # a repetitive corpus: every token has one successor
    ids = torch.stack([cycle.roll(-s).repeat(2) for s in range(8)])  # (8, 16)
    mask = torch.ones_like(ids)
    mask[4:, 12:] = 0  # some rows padded
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-2)
    first = model(ids, mask, labels=ids)
    assert abs(first.forward_loss.item() - math.log(V)) < 0.1  # a uniform guess at the start
    for _ in range(200):
        optimizer.zero_grad()
        out = model(ids, mask, labels=ids)
        out.loss.backward()
        optimizer.step()
    out = model(ids, mask, labels=ids)
    assert out.forward_loss.item() < 0.1 * math.log(V)
    assert out.backward_loss.item() < 0.1 * math.log(V)


def test_middle_fill_is_the_sum_of_both_log_softmaxes_by_hand():
    ids, mask = ragged_batch()
    scores = MODEL.fill_middle_log_probs(ids, mask)
    out = MODEL(ids, mask)
    for b, n in enumerate(LENGTHS):
        for t in range(ids.size(1)):
            if 1 <= t <= n - 2:
                by_hand = F.log_softmax(out.forward_logits[b, t - 1], -1) + F.log_softmax(out.backward_logits[b, t + 1], -1)
                torch.testing.assert_close(scores[b, t], by_hand)
            else:  # no token on one side: nothing to combine
                assert torch.all(scores[b, t] == float("-inf"))
    # neither side reads the token it fills: changing it changes nothing at that position
    changed = _change(ids, [0], [3])
    torch.testing.assert_close(MODEL.fill_middle_log_probs(changed, mask)[0, 3], scores[0, 3], rtol=0, atol=0)
