"""The fast path (bertedu.model.fast) computes the readable path's function: same loss, same gradients."""

import copy

import pytest
import torch

from bertedu import BertConfig, BertForPreTraining
from bertedu.model import fast
from bertedu.model.fast import set_fast_path
from bertedu.training.loop import evaluate

TOL = dict(rtol=1e-5, atol=1e-5)  # fp32; the fast path only reorders sums


def ragged_batch(B=5, T=24, V=97, seed=0):
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([T, 7, 15, 3, 20][:B])
    real = torch.arange(T)[None, :] < lengths[:, None]  # right padding
    input_ids = torch.randint(5, V, (B, T), generator=g) * real
    token_type_ids = ((torch.arange(T)[None, :] >= (lengths // 2)[:, None]) & real).long()
    labels = torch.where(real & (torch.rand(B, T, generator=g) < 0.3), input_ids, torch.full_like(input_ids, -100))
    labels[3, 1] = input_ids[3, 1]  # every sequence, even the 3-token one, has a label
    return dict(input_ids=input_ids, token_type_ids=token_type_ids, attention_mask=real.long(),
                labels=labels, next_sentence_label=torch.tensor([0, 1, 1, 0, 1][:B]))


def config(**kw):
    # odd sizes, dropout off: the two paths must then compute exactly the same function
    return BertConfig(vocab_size=97, hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                      intermediate_size=80, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


def loss_and_grads(model, batch):
    model.zero_grad()
    out = model(**batch)
    out.loss.backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("options", [
    dict(unpad=True, attention="nested"),
    dict(unpad=True, attention="padded"),
    dict(sparse_mlm=True),
    dict(unpad=True, sparse_mlm=True, attention="nested"),
    dict(unpad=True, sparse_mlm=True, attention="padded"),
])
@pytest.mark.parametrize("kernel", ["reference", "sdpa"])
def test_fast_path_matches_the_readable_path(options, kernel):
    torch.manual_seed(0)
    readable = BertForPreTraining(config(attn_implementation=kernel))
    fast_model = set_fast_path(copy.deepcopy(readable), **options)
    batch = ragged_batch()
    ref, ref_grads = loss_and_grads(readable, batch)
    out, grads = loss_and_grads(fast_model, batch)
    torch.testing.assert_close(out.loss, ref.loss, **TOL)
    torch.testing.assert_close(out.mlm_loss, ref.mlm_loss, **TOL)
    torch.testing.assert_close(out.nsp_logits, ref.nsp_logits, **TOL)
    assert grads.keys() == ref_grads.keys()
    for name, g in ref_grads.items():
        torch.testing.assert_close(grads[name], g, **TOL, msg=lambda m, n=name: f"{n}: {m}")
    labelled = batch["labels"] != -100
    if options.get("sparse_mlm"):
        assert out.mlm_logits.shape == (int(labelled.sum()), 97)
        torch.testing.assert_close(out.mlm_logits, ref.mlm_logits[labelled], **TOL)
        assert torch.equal(out.mlm_labels, batch["labels"][labelled])
    else:
        real = batch["attention_mask"].bool()
        torch.testing.assert_close(out.mlm_logits[real], ref.mlm_logits[real], **TOL)


def test_unpadding_touches_only_real_tokens():
    batch = ragged_batch()
    where = fast.unpad_index(batch["attention_mask"])
    assert where.indices.numel() == int(batch["attention_mask"].sum()) == 24 + 7 + 15 + 3 + 20
    assert where.cu_seqlens.tolist() == [0, 24, 31, 46, 49, 69]
    x = torch.randn(5, 24, 4)
    back = fast.pad(fast.unpad(x, where), where)
    real = batch["attention_mask"].bool()
    assert torch.equal(back[real], x[real]) and not back[~real].any()  # zeros at padding


def test_left_padding_is_refused_with_a_clear_error():
    mask = torch.tensor([[0, 1, 1], [1, 1, 1]])
    with pytest.raises(ValueError, match="right padding"):
        fast.unpad_index(mask)


def test_nested_attention_falls_back_to_padding_with_one_warning(monkeypatch):
    def broken(*args, **kwargs):
        raise NotImplementedError("no jagged kernel here")

    monkeypatch.setattr(fast, "_attention_nested", broken)
    monkeypatch.setattr(fast, "_nested_failed", set())
    torch.manual_seed(0)
    readable = BertForPreTraining(config())
    fast_model = set_fast_path(copy.deepcopy(readable), unpad=True, attention="nested")
    batch = ragged_batch()
    with pytest.warns(UserWarning, match="padding around attention instead"):
        out = fast_model(**batch)
    torch.testing.assert_close(out.loss, readable(**batch).loss, **TOL)


def test_evaluation_scores_the_sparse_head_like_the_dense_one():
    torch.manual_seed(0)
    readable = BertForPreTraining(config())
    fast_model = set_fast_path(copy.deepcopy(readable), unpad=True, sparse_mlm=True)
    samples = [ragged_batch(seed=s) for s in range(3)]

    def collate(batches, generator):
        return {k: torch.cat([b[k] for b in batches]) for k in batches[0]}

    a = evaluate(readable, samples, collate, batch_size=2)
    b = evaluate(fast_model, samples, collate, batch_size=2)
    assert a["mlm_accuracy"] == pytest.approx(b["mlm_accuracy"]) and a["nsp_accuracy"] == b["nsp_accuracy"]
    assert a["loss"] == pytest.approx(b["loss"], rel=1e-5)


def test_hidden_states_requests_take_the_readable_path():
    model = set_fast_path(BertForPreTraining(config()), unpad=True, sparse_mlm=True)
    out = model(**ragged_batch(), output_hidden_states=True)
    assert out.mlm_logits.shape == (5, 24, 97) and len(out.hidden_states) == 3
    with pytest.raises(ValueError, match="attention must be one of"):
        set_fast_path(model, unpad=True, attention="flash")


def test_bf16_autocast_keeps_the_loss_within_bf16_precision():
    torch.manual_seed(0)
    model = set_fast_path(BertForPreTraining(config()), unpad=True, sparse_mlm=True)
    batch = ragged_batch()
    fp32 = model(**batch).loss
    with torch.autocast("cpu", dtype=torch.bfloat16):
        bf16 = model(**batch).loss
    assert bf16.dtype == torch.float32  # the loss is computed in fp32 from bf16 logits
    torch.testing.assert_close(bf16, fp32, rtol=2e-2, atol=0.0)


@pytest.mark.slow
def test_the_fast_path_compiles_to_the_same_function():
    torch.manual_seed(0)
    readable = BertForPreTraining(config())
    fast_model = set_fast_path(copy.deepcopy(readable), unpad=True, sparse_mlm=True)
    batch = ragged_batch()
    compiled = torch.compile(fast_model, backend="aot_eager")  # traces forward and backward, no codegen
    torch.testing.assert_close(compiled(**batch).loss, readable(**batch).loss, **TOL)


def test_fused_adamw_takes_the_same_steps_as_the_loop():
    from bertedu.training.loop import TrainConfig, make_optimizer

    torch.manual_seed(0)
    model = BertForPreTraining(config())
    twin = copy.deepcopy(model)
    batch = ragged_batch()
    optimizers = [make_optimizer(m, TrainConfig(lr=1e-3, steps=3, fused_adamw=fused), torch.device("cpu"))
                  for m, fused in ((model, False), (twin, True))]
    assert optimizers[1].defaults["fused"] and not optimizers[0].defaults["fused"]
    for _ in range(3):
        for m, opt in zip((model, twin), optimizers):
            opt.zero_grad()
            m(**batch).loss.backward()
            opt.step()
    for (name, p), q in zip(model.named_parameters(), twin.parameters()):
        torch.testing.assert_close(q, p, rtol=1e-5, atol=1e-6, msg=lambda m, n=name: f"{n}: {m}")
