"""Embeddings, encoder, BertModel and the pretraining heads (tiny config)."""

import pytest
import torch
import torch.nn.functional as F

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.model.embeddings import BertEmbeddings, sinusoidal_positions
from conftest import ragged_batch


def test_embeddings_are_the_normalised_sum_of_three_tables():
    cfg = BertConfig.tiny(vocab_size=50)
    emb = BertEmbeddings(cfg).eval()
    ids = torch.tensor([[2, 7, 9, 3]])
    tt = torch.tensor([[0, 0, 1, 1]])
    by_hand = emb.word_embeddings.weight[ids] + emb.token_type_embeddings.weight[tt] + emb.position_embeddings.weight[:4]
    by_hand = F.layer_norm(by_hand, (cfg.hidden_size,), emb.layer_norm.weight, emb.layer_norm.bias, cfg.layer_norm_eps)
    torch.testing.assert_close(emb(ids, tt), by_hand)


def test_sinusoidal_table_matches_the_formula():
    table = sinusoidal_positions(10, 6)
    pos, i = 7, 1
    assert table.shape == (10, 6)
    assert torch.isclose(table[pos, 2 * i], torch.sin(torch.tensor(pos / 10000 ** (2 * i / 6))))
    assert torch.isclose(table[pos, 2 * i + 1], torch.cos(torch.tensor(pos / 10000 ** (2 * i / 6))))
    assert sinusoidal_positions(4, 5).shape == (4, 5)  # odd widths work too


def test_outputs_and_shapes_on_request():
    cfg = BertConfig.tiny(vocab_size=100)
    model = BertModel(cfg).eval()
    ids, tt, am = ragged_batch(100)
    out = model(ids, tt, am)
    B, T = ids.shape
    assert out.last_hidden_state.shape == (B, T, cfg.hidden_size)
    assert out.pooler_output.shape == (B, cfg.hidden_size)
    assert out.hidden_states is None and out.attentions is None
    out = model(ids, tt, am, output_hidden_states=True, output_attentions=True)
    assert len(out.hidden_states) == cfg.num_hidden_layers + 1
    torch.testing.assert_close(out.hidden_states[-1], out.last_hidden_state)
    assert len(out.attentions) == cfg.num_hidden_layers
    assert out.attentions[0].shape == (B, cfg.num_attention_heads, T, T)
    # padded keys get no attention from anyone
    assert torch.all(out.attentions[0][3, :, :, 2:] == 0)


@pytest.mark.parametrize("kernel", ["reference", "sdpa"])
def test_padding_invariance(kernel):
    """Appending [PAD] tokens leaves every real token's output unchanged."""
    cfg = BertConfig.tiny(vocab_size=100, attn_implementation=kernel)
    model = BertModel(cfg).eval()
    ids = torch.randint(1, 100, (2, 6))
    tt = torch.tensor([[0, 0, 0, 1, 1, 1]] * 2)
    short = model(ids, tt, torch.ones_like(ids), output_hidden_states=True)
    pad = 5
    ids_p = torch.cat([ids, torch.zeros(2, pad, dtype=torch.long)], 1)
    tt_p = torch.cat([tt, torch.zeros(2, pad, dtype=torch.long)], 1)
    am_p = torch.cat([torch.ones_like(ids), torch.zeros(2, pad, dtype=torch.long)], 1)
    long = model(ids_p, tt_p, am_p, output_hidden_states=True)
    for a, b in zip(short.hidden_states, long.hidden_states):
        torch.testing.assert_close(b[:, :6], a, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(long.pooler_output, short.pooler_output, atol=1e-5, rtol=1e-5)


def test_mlm_decoder_is_tied_to_word_embeddings():
    model = BertForPreTraining(BertConfig.tiny(vocab_size=100))
    assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[5, 0] = 42.0
    assert model.mlm.decoder.weight[5, 0] == 42.0


def test_pretraining_loss_is_mlm_over_labelled_positions_plus_nsp():
    V = 100
    model = BertForPreTraining(BertConfig.tiny(vocab_size=V)).eval()
    ids, tt, am = ragged_batch(V)
    labels = torch.full_like(ids, -100)
    labels[0, 1], labels[1, 3], labels[2, 2] = 11, 22, 33
    nsp = torch.tensor([0, 1, 1, 0])
    out = model(ids, tt, am, labels=labels, next_sentence_label=nsp)
    assert out.mlm_logits.shape == (*ids.shape, V) and out.nsp_logits.shape == (4, 2)
    picked = out.mlm_logits[[0, 1, 2], [1, 3, 2]]  # (3, V): the three labelled positions only
    mlm = -picked.log_softmax(-1)[torch.arange(3), torch.tensor([11, 22, 33])].mean()
    nsp_loss = -out.nsp_logits.log_softmax(-1)[torch.arange(4), nsp].mean()
    torch.testing.assert_close(out.mlm_loss, mlm)
    torch.testing.assert_close(out.nsp_loss, nsp_loss)
    torch.testing.assert_close(out.loss, mlm + nsp_loss)
    # changing a logit's label at an ignored position changes nothing
    labels2 = labels.clone()
    assert model(ids, tt, am, labels=labels2).mlm_loss == out.mlm_loss


@pytest.mark.slow
def test_one_batch_can_be_overfit():
    torch.manual_seed(0)
    V = 60
    model = BertForPreTraining(BertConfig.tiny(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0))
    ids, tt, am = ragged_batch(V)
    labels = torch.where(am.bool(), ids, torch.full_like(ids, -100))
    nsp = torch.tensor([0, 1, 0, 1])
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    first = None
    for _ in range(60):
        loss = model(ids, tt, am, labels=labels, next_sentence_label=nsp).loss
        first = first if first is not None else loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 4.0 and loss.item() < 0.05


def test_clear_errors_for_bad_inputs():
    model = BertModel(BertConfig.tiny(vocab_size=100, max_position_embeddings=8)).eval()
    with pytest.raises(ValueError, match="max_position_embeddings=8"):
        model(torch.ones(1, 9, dtype=torch.long))
    with pytest.raises(ValueError, match="outside the model's vocabulary of 100"):
        model(torch.tensor([[1, 2, 150]]))
    with pytest.raises(ValueError, match=r"\(batch, tokens\)"):
        model(torch.ones(4, dtype=torch.long))
    with pytest.raises(ValueError, match="attention_mask"):
        model(torch.ones(1, 4, dtype=torch.long), attention_mask=torch.ones(1, 3))


def test_attention_kernel_switch_keeps_outputs():
    model = BertModel(BertConfig.tiny(vocab_size=100)).eval()
    ids, tt, am = ragged_batch(100)
    a = model(ids, tt, am).last_hidden_state
    model.set_attn_implementation("reference")
    b = model(ids, tt, am).last_hidden_state
    real = am.bool()
    torch.testing.assert_close(a[real], b[real], atol=1e-5, rtol=1e-5)
    with pytest.raises(ValueError, match="unknown attention kernel"):
        model.set_attn_implementation("magic")


def test_heads_do_not_reinitialise_the_tied_embeddings():
    model = BertForPreTraining(BertConfig.tiny(vocab_size=100))
    assert torch.all(model.bert.embeddings.word_embeddings.weight[0] == 0)  # [PAD] row
    assert torch.all(model.mlm.decoder.bias == 0)
