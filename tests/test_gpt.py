"""bertedu.family.gpt: the decoder-only model built from BERT's blocks (notebook 17)."""

import math

import pytest
import torch
import torch.nn.functional as F

from bertedu import BertConfig
from bertedu.model.attention import scaled_dot_product_attention
from bertedu.family.gpt import CausalLM, GPTConfig, causal_lm_loss
from bertedu.model.heads import BertForMaskedLM

V = 50


def tiny_lm(**overrides) -> CausalLM:
    torch.manual_seed(0)
    config = GPTConfig.tiny(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **overrides)
    model = CausalLM(config).eval()
    with torch.no_grad():  # non-zero biases and LayerNorm gains, so that a slip can show
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return model


def test_changing_a_later_token_never_changes_earlier_logits():
    model = tiny_lm()
    ids = torch.randint(1, V, (3, 12))
    base = model(ids).logits
    for t in range(12):
        changed = ids.clone()
        changed[:, t] = (changed[:, t] + 7) % (V - 1) + 1  # another real token at position t
        logits = model(changed).logits
        torch.testing.assert_close(logits[:, :t], base[:, :t], rtol=0, atol=1e-6)  # the past: unchanged
        assert (logits[:, t:] - base[:, t:]).abs().amax() > 1e-3  # from t on: it does see the change


def test_bert_is_not_causal_the_same_blocks_are():
    """The contrast the mask makes: the same change does move BERT's earlier outputs."""
    torch.manual_seed(0)
    bert = BertForMaskedLM(BertConfig.tiny(vocab_size=V)).eval()
    ids = torch.randint(1, V, (2, 10))
    changed = ids.clone()
    changed[:, -1] = (changed[:, -1] + 3) % (V - 1) + 1
    assert (bert(ids).mlm_logits[:, 0] - bert(changed).mlm_logits[:, 0]).abs().amax() > 1e-4


def test_attention_probabilities_are_zero_above_the_diagonal():
    model = tiny_lm()
    out = model(torch.randint(1, V, (2, 7)), output_attentions=True)
    assert len(out.attentions) == model.config.num_hidden_layers
    for probs in out.attentions:  # (B, N, T, T)
        assert torch.all(probs.triu(diagonal=1) == 0)
        torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))
        torch.testing.assert_close(probs[..., 0, 0], torch.ones(probs.shape[:2]))  # token 0 sees only itself


def test_loss_is_the_shifted_cross_entropy_by_hand():
    model = tiny_lm()
    ids = torch.randint(1, V, (2, 6))
    labels = ids.clone()
    labels[1, 4:] = -100  # row 1 ends after 4 tokens (padding)
    attention_mask = (labels != -100).long()
    out = model(ids, attention_mask=attention_mask, labels=labels)
    log_probs = out.logits.log_softmax(-1)  # (B, T, V)
    terms = [-log_probs[b, t, labels[b, t + 1]]  # position t predicts token t + 1
             for b in range(2) for t in range(5) if labels[b, t + 1] != -100]
    assert len(terms) == 5 + 3
    torch.testing.assert_close(out.loss, torch.stack(terms).mean())
    torch.testing.assert_close(causal_lm_loss(out.logits, labels), out.loss)


def test_untrained_loss_starts_near_ln_v():
    torch.manual_seed(0)
    model = CausalLM(GPTConfig.tiny(vocab_size=1000)).eval()
    ids = torch.randint(5, 1000, (8, 32))
    with torch.no_grad():
        loss = float(model(ids, labels=ids).loss)
    assert abs(loss - math.log(1000)) < 0.1


def test_causal_attention_matches_torch_is_causal():
    q, k, v = torch.randn(3, 2, 4, 9, 16).unbind(0)  # (B, N, T, Dh) each
    ours, _ = scaled_dot_product_attention(q, k, v, causal=True)
    torch.testing.assert_close(ours, F.scaled_dot_product_attention(q, k, v, is_causal=True))
    # the model's own (1, 1, T, T) boolean mask, given to torch's kernel, is the same thing
    model = tiny_lm(attn_implementation="reference")
    fast = tiny_lm(attn_implementation="sdpa")
    ids = torch.randint(1, V, (2, 11))
    torch.testing.assert_close(model(ids).logits, fast(ids).logits, rtol=1e-5, atol=1e-5)


def test_right_padding_changes_no_real_token():
    model = tiny_lm()
    ids = torch.randint(1, V, (1, 8))
    padded = torch.cat([ids, torch.zeros(1, 4, dtype=torch.long)], dim=1)  # [PAD] = 0
    mask = torch.cat([torch.ones(1, 8), torch.zeros(1, 4)], dim=1).long()
    torch.testing.assert_close(model(padded, attention_mask=mask).logits[:, :8], model(ids).logits)


def test_head_is_tied_and_sizes_match_bert():
    model = tiny_lm()
    assert model.lm_head.decoder.weight is model.gpt.embeddings.word_embeddings.weight
    assert model.gpt.embeddings.token_type_embeddings is None and model.gpt.pooler is None
    bert = BertForMaskedLM(BertConfig.tiny(vocab_size=V))
    D = model.config.hidden_size
    assert bert.num_parameters() - model.num_parameters() == 2 * D  # BERT's segment table only


def test_greedy_generation_is_the_argmax_step_by_step():
    model = tiny_lm()
    prompt = torch.randint(1, V, (2, 3))
    out = model.generate(prompt, 5)
    assert out.shape == (2, 8) and torch.equal(out[:, :3], prompt)
    ids = prompt
    for _ in range(5):
        ids = torch.cat([ids, model(ids).logits[:, -1].argmax(-1, keepdim=True)], dim=1)
    assert torch.equal(out, ids)


def test_top_k_sampling_draws_only_among_the_k_best_and_repeats_with_a_seed():
    model = tiny_lm()
    prompt = torch.randint(1, V, (64, 4))
    out = model.generate(prompt, 1, top_k=3, generator=torch.Generator().manual_seed(0))
    top3 = model(prompt).logits[:, -1].topk(3).indices  # (64, 3)
    assert (out[:, -1:] == top3).any(-1).all()
    assert len(set(out[:, -1].tolist())) > 1  # it samples, it is not greedy
    again = model.generate(prompt, 1, top_k=3, generator=torch.Generator().manual_seed(0))
    assert torch.equal(out, again)


def test_banned_ids_eos_and_long_prompts():
    model = tiny_lm(max_position_embeddings=16)
    prompt = torch.randint(1, V, (1, 20))  # longer than the 16 positions: only the last 16 are read
    out = model.generate(prompt, 4, banned_ids=(0, 1, 2))
    assert out.shape == (1, 24) and not set(out[0, 20:].tolist()) & {0, 1, 2}
    first = int(model(prompt[:, -16:]).logits[0, -1].argmax())
    stopped = model.generate(prompt, 10, eos_token_id=first)
    assert stopped.shape == (1, 21) and int(stopped[0, -1]) == first
    assert model.training is False
    with pytest.raises(ValueError, match="top_k"):
        model.generate(prompt, 1, top_k=0)


@pytest.mark.slow
def test_a_few_steps_learn_a_repeating_sequence():
    torch.manual_seed(0)
    model = CausalLM(GPTConfig.tiny(vocab_size=V))
    ids = torch.arange(1, 11).repeat(4, 3)  # (4, 30): 1 2 ... 10 1 2 ... 10 ...
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3)
    for _ in range(60):
        loss = model(ids, labels=ids).loss
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert loss.item() < 0.2
    out = model.generate(ids[:1, :5], 10)
    assert out[0, 5:].tolist() == [6, 7, 8, 9, 10, 1, 2, 3, 4, 5]
