"""The training loop (bertedu.training.loop) and its checkpoints (bertedu.training.checkpoint), on a tiny BERT.

The data is synthetic: random token sequences of ragged length with exactly K masked
positions per example, so an MLM loss (a mean over labelled tokens) of a batch is the
mean of its halves' losses; that is what makes accumulation and DDP comparable.
"""

import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn
from torch.optim.optimizer import register_optimizer_step_pre_hook

from bertedu import BertConfig, BertForPreTraining
from bertedu.training.checkpoint import CheckpointError, latest_checkpoint, load_checkpoint, rng_state, set_rng_state
from bertedu.training.batches import batch_seed, epoch_permutation
from bertedu.training.loop import (
    TrainConfig, TrainingDivergedError, clip_gradients, evaluate, linear_schedule, param_groups, read_metrics, train,
)
from bertedu.course.viz import plot_metrics
import bertedu.training.loop as loop_module
from bertedu.errors import SettingError
from bertedu.training.distributed import setup_distributed

V, T, K, MASK_ID = 40, 12, 2, 3  # vocabulary, max length, masked positions per example, [MASK]


@pytest.fixture(autouse=True)
def _one_thread():
    """Tensors this small run fastest on one thread (and do not fight a busy CI machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def tiny_config(dropout: float = 0.0) -> BertConfig:
    return BertConfig.tiny(vocab_size=V, hidden_size=32, intermediate_size=64, max_position_embeddings=T,
                           hidden_dropout_prob=dropout, attention_probs_dropout_prob=dropout)


def tiny_model(dropout: float = 0.0, seed: int = 0) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(tiny_config(dropout))


class ToyPairs(torch.utils.data.Dataset):
    """n random sequences of T-4..T tokens (ids 5..V-1) with a random NSP label."""

    def __init__(self, n: int, seed: int = 0):
        g = torch.Generator().manual_seed(seed)
        self.ids = torch.randint(5, V, (n, T), generator=g)
        self.lengths = torch.randint(T - 4, T + 1, (n,), generator=g)
        self.nsp = torch.randint(0, 2, (n,), generator=g)
        self.seen: list[int] = []

    def __len__(self):
        return len(self.ids)

    def __getitem__(self, i):
        self.seen.append(i)
        return {"input_ids": self.ids[i, : self.lengths[i]], "nsp": int(self.nsp[i])}


def collate(examples, generator, random_masks=True):
    """Pad, and mask exactly K positions per example (random ones drawn from `generator`)."""
    B = len(examples)
    L = max(len(e["input_ids"]) for e in examples)
    input_ids = torch.zeros(B, L, dtype=torch.long)
    attention_mask = torch.zeros(B, L, dtype=torch.long)
    labels = torch.full((B, L), -100)
    token_type_ids = torch.zeros(B, L, dtype=torch.long)
    for b, e in enumerate(examples):
        n = len(e["input_ids"])
        input_ids[b, :n], attention_mask[b, :n] = e["input_ids"], 1
        token_type_ids[b, n // 2 : n] = 1  # from the real length, so padding changes nothing
        where = torch.randperm(n - 1, generator=generator)[:K] + 1 if random_masks else torch.arange(1, K + 1)
        labels[b, where] = input_ids[b, where]
        input_ids[b, where] = MASK_ID
    return {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask,
            "labels": labels, "next_sentence_label": torch.tensor([e["nsp"] for e in examples])}


def fixed_collate(examples, generator):
    return collate(examples, generator, random_masks=False)


def config(**kw) -> TrainConfig:
    base = dict(lr=1e-3, batch_size=4, steps=3, log_every=1, progress=False, seed=7)
    return TrainConfig(**{**base, **kw})


def weights(model) -> dict:
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def losses(records) -> list:
    return [(r["step"], r["loss"]) for r in records if "loss" in r]


# ---- optimiser pieces ------------------------------------------------------------------------
def test_param_groups_decay_weights_but_not_biases_or_layer_norms():
    model = tiny_model()
    decay, no_decay = param_groups(model, 0.01)
    assert decay["weight_decay"] == 0.01 and no_decay["weight_decay"] == 0.0
    # every parameter exactly once; the tied decoder weight is the word-embedding matrix
    ids = [id(p) for p in decay["params"] + no_decay["params"]]
    assert sorted(ids) == sorted(id(p) for p in model.parameters()) and len(set(ids)) == len(ids)
    assert "mlm.decoder.weight" not in decay["names"] + no_decay["names"]
    for name, _ in model.named_parameters():
        expect_no_decay = name.endswith(".bias") or name.endswith("norm.weight")
        assert (name in no_decay["names"]) == expect_no_decay, name
    for name in ["bert.embeddings.layer_norm.weight", "bert.layers.0.attention_norm.weight",
                 "bert.layers.1.output_norm.weight", "mlm.layer_norm.weight", "mlm.decoder.bias",
                 "bert.layers.0.attention.query.bias", "nsp.classifier.bias"]:
        assert name in no_decay["names"], name
    for name in ["bert.embeddings.word_embeddings.weight", "bert.embeddings.position_embeddings.weight",
                 "bert.layers.0.attention.query.weight", "bert.layers.1.feed_forward.dense_out.weight",
                 "bert.pooler.dense.weight", "mlm.dense.weight", "nsp.classifier.weight"]:
        assert name in decay["names"], name


def test_linear_schedule_warms_up_then_decays_to_zero():
    assert linear_schedule(0, 10, 100) == 0.0
    assert linear_schedule(5, 10, 100) == 0.5
    assert linear_schedule(10, 10, 100) == 1.0
    assert linear_schedule(55, 10, 100) == 0.5
    assert linear_schedule(100, 10, 100) == 0.0
    assert linear_schedule(150, 10, 100) == 0.0
    assert linear_schedule(0, 0, 100) == 1.0  # no warm-up
    assert linear_schedule(0.55, 0.1, 1.0) == pytest.approx(0.5)  # as a fraction of a budget


def test_warmup_offset_counts_the_first_update_in_the_warm_up():
    """warmup_offset=1 (the minilm-mlm recipe): updates 1..warmup get 1/warmup .. 1 of the peak,
    where BERT's schedule starts at 0; the decay is the same."""
    assert [linear_schedule(s, 4, 20, warmup_offset=1) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 15 / 16]
    assert [linear_schedule(s, 4, 20) for s in range(6)] == [0.0, 0.25, 0.5, 0.75, 1.0, 15 / 16]
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, warmup_steps=2, warmup_offset=1))
    assert [r["lr"] for r in result.records if "lr" in r] == pytest.approx([1e-3 * x for x in (0.5, 1, 1, 0.75, 0.5, 0.25)])
    with pytest.raises(ValueError, match="warmup_offset is 0"):
        TrainConfig(steps=6, warmup_offset=2)
    with pytest.raises(ValueError, match="needs a step budget"):
        TrainConfig(max_tokens=100, warmup_ratio=0.1, warmup_offset=1)


def test_warmup_steps_when_given_win_over_a_warmup_ratio():
    """PretrainConfig and FinetuneConfig default to a warmup_ratio; a warmup_steps above 0 is
    the one used (mlm_adapt's 5% was rounded down to whole steps: 62 of 1,250, not 62.5)."""
    both = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, warmup_steps=2, warmup_ratio=0.5))
    steps = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, warmup_steps=2))
    assert [r["lr"] for r in both.records] == [r["lr"] for r in steps.records]
    ratio = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, warmup_ratio=0.5))
    assert [r["lr"] for r in ratio.records] == pytest.approx([1e-3 * linear_schedule(s, 3, 6) for s in range(6)])


def test_a_part_of_the_model_can_have_its_own_peak_learning_rate():
    """peak_lrs {prefix: lr}: those parameters get groups of their own (decay and no decay), whose
    rate follows the same schedule from their own peak; a frozen parameter is in no group."""
    model = tiny_model()
    model.bert.embeddings.word_embeddings.weight.requires_grad_(False)  # and so the tied decoder
    groups = param_groups(model, 0.01, {"mlm.": 1e-2})
    assert [("peak_lr" in g, g["weight_decay"]) for g in groups] == [(False, 0.01), (False, 0.0), (True, 0.01),
                                                                      (True, 0.0)]
    assert {n for g in groups[2:] for n in g["names"]} == {n for n, p in model.named_parameters()
                                                          if n.startswith("mlm.") and p.requires_grad}
    assert not any("word_embeddings" in n for g in groups for n in g["names"])
    assert len(param_groups(model, 0.01)) == 2  # without peak_lrs: decay, no decay, as always

    seen = []

    def hook(optimizer, args, kwargs):
        seen.append(sorted({g["lr"] for g in optimizer.param_groups}))

    from torch.optim.optimizer import register_optimizer_step_pre_hook

    handle = register_optimizer_step_pre_hook(hook)
    try:
        train(model, ToyPairs(16), fixed_collate, config(steps=4, warmup_steps=2), peak_lrs={"mlm.": 1e-2})
    finally:
        handle.remove()
    multipliers = [linear_schedule(s, 2, 4) for s in range(4)]
    assert seen == [sorted({1e-3 * m, 1e-2 * m}) for m in multipliers]


def test_an_evaluator_replaces_the_held_out_data_set():
    """evaluator(model) -> numbers: called where eval_dataset would be evaluated, logged as eval_*."""
    calls = []

    def evaluator(model):
        calls.append(model.training)
        return {"mlm_accuracy": 0.5, "loss": 1.0}

    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=4, eval_every=2), evaluator=evaluator)
    assert [(r["step"], r["eval_mlm_accuracy"]) for r in result.records if "eval_loss" in r] == [(2, 0.5), (4, 0.5)]
    assert result.eval == {"mlm_accuracy": 0.5, "loss": 1.0} and len(calls) == 2


def test_clip_gradients_bounds_the_norm_and_returns_the_norm_before():
    model = tiny_model()
    batch = collate([ToyPairs(4)[i] for i in range(4)], torch.Generator().manual_seed(0))
    (model(**batch).loss * 1000).backward()
    before = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None))
    returned = clip_gradients(model, 0.5)
    after = torch.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters() if p.grad is not None))
    assert before > 0.5 and torch.isclose(returned, before)
    assert after <= 0.5 * (1 + 1e-5)


def test_train_clips_before_every_update():
    seen = []

    def check(optimizer, args, kwargs):
        grads = [p.grad for g in optimizer.param_groups for p in g["params"] if p.grad is not None]
        seen.append(float(torch.sqrt(sum(g.pow(2).sum() for g in grads))))

    handle = register_optimizer_step_pre_hook(check)
    try:
        result = train(tiny_model(), ToyPairs(16), collate, config(max_grad_norm=0.05, steps=4))
    finally:
        handle.remove()
    assert len(seen) == 4 and max(seen) <= 0.05 * (1 + 1e-4)
    assert all(r["grad_norm"] > 0.05 for r in result.records)  # clipping really was needed


# ---- the loop ----------------------------------------------------------------------------------
def test_overfits_one_batch():
    data = ToyPairs(8)
    result = train(tiny_model(), data, fixed_collate, config(batch_size=8, steps=60, lr=1e-2, warmup_steps=5))
    first, last = result.records[0]["loss"], result.loss
    assert last < 0.1 * first and last < 0.4, (first, last)


def test_gradient_accumulation_equals_one_big_batch():
    """k micro-batches of b == one batch of k*b, for a loss that is a mean over equal pieces.

    "Equal" means up to float summation order (atol 1e-5 on the weights after 3 AdamW
    steps). It holds here because every example has exactly K labelled tokens, so the MLM
    mean over a batch's labelled tokens is the mean of its micro-batches' means; with
    ragged label counts the accumulated loss weights tokens slightly differently.
    """
    big, small = tiny_model(), tiny_model()
    r_big = train(big, ToyPairs(24), fixed_collate, config(batch_size=8, grad_accum_steps=1))
    r_small = train(small, ToyPairs(24), fixed_collate, config(batch_size=4, grad_accum_steps=2))
    for name, w in weights(big).items():
        torch.testing.assert_close(weights(small)[name], w, atol=1e-5, rtol=0, msg=name)
    for a, b in zip(r_big.records, r_small.records):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5)
        # Adam hardly notices a gradient k times too large; the gradient norm does
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-4)
    assert r_big.tokens_seen == r_small.tokens_seen == int(sum(ToyPairs(24).lengths[epoch_permutation(24, 7, 0)]))


def test_data_order_is_a_seeded_permutation_per_epoch():
    data = ToyPairs(20)  # global batch 8: 2 steps per epoch, the last 4 examples of each epoch dropped
    train(tiny_model(), data, fixed_collate, config(batch_size=4, grad_accum_steps=2, steps=4))
    for epoch in (0, 1):
        order = data.seen[epoch * 16 : (epoch + 1) * 16]
        assert order == epoch_permutation(20, 7, epoch)[:16].tolist()
    assert data.seen[:16] != data.seen[16:]
    assert batch_seed(7, 3, 1) == batch_seed(7, 3, 1) != batch_seed(7, 3, 0)


def test_data_loader_workers_change_nothing():
    a, b = tiny_model(dropout=0.1), tiny_model(dropout=0.1)
    r_a = train(a, ToyPairs(24), collate, config(steps=6))
    r_b = train(b, ToyPairs(24), collate, config(steps=6, num_workers=2))
    assert losses(r_a.records) == losses(r_b.records)
    assert all(torch.equal(w, weights(b)[k]) for k, w in weights(a).items())


def test_learning_rate_follows_the_schedule_and_budgets_stop_the_run():
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, warmup_steps=2))
    assert [r["lr"] for r in result.records] == pytest.approx([1e-3 * linear_schedule(s, 2, 6) for s in range(6)])
    assert result.stopped_by == "steps" and result.step == 6
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=None, epochs=2))
    assert result.step == 8 and result.stopped_by == "steps"  # 4 steps per epoch
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=None, max_tokens=100))
    assert result.stopped_by == "max_tokens" and result.tokens_seen >= 100
    assert result.records[-2]["tokens"] < 100  # it stopped at the first step past the budget
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=None, time_budget=0.2))
    assert result.stopped_by == "time_budget" and result.elapsed_s >= 0.2
    with pytest.raises(ValueError, match="budget"):
        TrainConfig()
    with pytest.raises(ValueError, match="warmup_ratio"):
        TrainConfig(max_tokens=10, warmup_steps=5)
    with pytest.raises(ValueError, match="global batch"):
        train(tiny_model(), ToyPairs(3), fixed_collate, config())


def test_resume_reproduces_the_uninterrupted_run_bit_for_bit(tmp_path):
    """Dropout on, random masks from the collate generator, an epoch boundary, an eval."""
    data, held_out = ToyPairs(24), ToyPairs(8, seed=1)
    cfg = dict(batch_size=4, grad_accum_steps=2, steps=7, warmup_steps=2, eval_every=3, save_every=2)
    full = tiny_model(dropout=0.1)
    r_full = train(full, data, collate, config(out=str(tmp_path / "full"), **cfg), eval_dataset=held_out)

    # Interrupted: stops after step 5 with checkpoints 4 and 5; then "crashes" before 5 is safe.
    part = config(out=str(tmp_path / "part"), keep_checkpoints=2, **cfg)
    r_stop = train(tiny_model(dropout=0.1), data, collate, part, eval_dataset=held_out, stop_at_step=5)
    assert r_stop.step == 5 and r_stop.stopped_by == "stop_at_step"
    shutil.rmtree(tmp_path / "part" / "checkpoint-5")
    resumed = tiny_model(dropout=0.1, seed=123)  # different initial weights: they must be loaded
    r_res = train(resumed, data, collate, part, eval_dataset=held_out, resume=True)

    assert r_res.step == 7 and r_res.tokens_seen == r_full.tokens_seen
    full_w, res_w = weights(full), weights(resumed)
    assert all(torch.equal(full_w[k], res_w[k]) for k in full_w)
    assert losses(r_res.records) == losses(r_full.records)  # steps 1..7, each once, equal floats
    assert [r for r in r_res.records if "eval_loss" in r] == [r for r in r_full.records if "eval_loss" in r]
    assert [r["step"] for r in read_metrics(tmp_path / "part")] == [r["step"] for r in read_metrics(tmp_path / "full")]
    assert resumed.mlm.decoder.weight is resumed.bert.embeddings.word_embeddings.weight  # still tied


class NaNAt(nn.Module):
    """Wraps a model; its loss becomes NaN on the given forward call."""

    def __init__(self, model, bad_call):
        super().__init__()
        self.model, self.config, self.bad_call, self.calls = model, model.config, bad_call, 0

    def forward(self, **batch):
        out = self.model(**batch)
        self.calls += 1
        if self.calls == self.bad_call:
            out.loss = out.loss * float("nan")
        return out


def test_nan_loss_stops_the_run_and_keeps_the_last_good_checkpoint(tmp_path):
    model = NaNAt(tiny_model(), bad_call=5)
    with pytest.raises(TrainingDivergedError, match="step 5") as info:
        train(model, ToyPairs(24), fixed_collate, config(steps=8, save_every=2, out=str(tmp_path)))
    assert info.value.step == 5 and "checkpoint-4" in str(info.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-4", "metrics.jsonl"]
    reloaded = NaNAt(tiny_model(seed=5), bad_call=0)
    state = load_checkpoint(tmp_path / "checkpoint-4", reloaded)
    assert state["step"] == 4
    for name, w in weights(model).items():  # the NaN step made no update
        assert torch.isfinite(w).all() and torch.equal(weights(reloaded)[name], w), name
    assert [r["step"] for r in read_metrics(tmp_path)] == [1, 2, 3, 4]


def deferred_read_back(monkeypatch) -> list:
    """Run train() as it runs on a GPU: the step's numbers stay on the device until a log line, an
    evaluation, a checkpoint or the last step reads them; returns the StepNumbers made."""
    made = []

    class Deferred(loop_module.StepNumbers):
        def __init__(self, *args, **kw):
            super().__init__(*args, defer=True, **kw)
            self.reads = []
            made.append(self)

        def read(self, state, checkpoint):
            self.reads.append(state.step)
            return super().read(state, checkpoint)

    monkeypatch.setattr(loop_module, "StepNumbers", Deferred)
    return made


def test_deferred_read_back_gives_the_same_run_and_reads_only_where_numbers_are_used(tmp_path, monkeypatch):
    cfg = dict(steps=9, log_every=4, save_every=3, fused_adamw=True)
    now = tiny_model()
    run_now = train(now, ToyPairs(40), fixed_collate, config(**cfg, out=str(tmp_path / "now")))
    made = deferred_read_back(monkeypatch)
    later = tiny_model()
    run_later = train(later, ToyPairs(40), fixed_collate, config(**cfg, out=str(tmp_path / "later")))
    assert made[0].reads == [3, 4, 6, 8, 9]  # saves at 3, 6, 9; log lines at 4, 8 and the last step
    for name, w in weights(now).items():
        assert torch.equal(weights(later)[name], w), name
    keys = ("step", "loss", "grad_norm", "lr", "tokens")
    assert [{k: r[k] for k in keys} for r in run_later.records] == [{k: r[k] for k in keys} for r in run_now.records]
    assert run_later.tokens_seen == run_now.tokens_seen and run_later.loss == run_now.loss


def test_deferred_divergence_makes_no_update_and_raises_at_the_next_read_back(tmp_path, monkeypatch):
    made = deferred_read_back(monkeypatch)
    model = NaNAt(tiny_model(), bad_call=5)
    with pytest.raises(TrainingDivergedError, match="step 5") as info:
        train(model, ToyPairs(24), fixed_collate, config(steps=8, log_every=4, save_every=3, fused_adamw=True,
                                                         out=str(tmp_path)))
    assert made[0].reads == [3, 4, 6]  # step 5 went bad; step 6's checkpoint read the numbers first
    assert info.value.step == 5 and "checkpoint-3" in str(info.value) and math.isnan(info.value.loss)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-3", "metrics.jsonl"]
    reference = NaNAt(tiny_model(), bad_call=0)
    train(reference, ToyPairs(24), fixed_collate, config(steps=8, log_every=4, fused_adamw=True), stop_at_step=4)
    for name, w in weights(model).items():  # steps 5 and 6 made no update: the weights are those after step 4
        assert torch.isfinite(w).all() and torch.equal(weights(reference)[name], w), name


def test_deferred_read_back_shows_a_progress_bar_before_any_loss_is_read(monkeypatch, capsys):
    deferred_read_back(monkeypatch)
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=3, log_every=3, progress=True,
                                                                     fused_adamw=True))
    assert result.step == 3 and math.isfinite(result.loss)
    assert "loss=" in capsys.readouterr().err  # the bar shows the loss once one is read back


def test_deferred_read_back_needs_the_fused_adamw():
    with pytest.raises(SettingError, match="fused"):
        loop_module.StepNumbers(config(), setup_distributed("cpu"), torch.optim.AdamW(tiny_model().parameters()),
                                0.0, defer=True)


# ---- checkpoints -------------------------------------------------------------------------------
def test_checkpoints_are_complete_and_leave_no_temporaries(tmp_path):
    result = train(tiny_model(), ToyPairs(16), fixed_collate,
                   config(steps=5, save_every=2, keep_checkpoints=2, out=str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-4", "checkpoint-5", "metrics.jsonl"]
    assert result.checkpoint == str(tmp_path / "checkpoint-5") == str(latest_checkpoint(tmp_path))
    for ckpt in tmp_path.glob("checkpoint-*"):
        assert sorted(p.name for p in ckpt.iterdir()) == [
            "config.json", "manifest.json", "model.safetensors", "train_config.json", "training_state.pt"]
    state = torch.load(tmp_path / "checkpoint-5" / "training_state.pt", weights_only=True)
    assert (state["step"], state["epoch"], state["batch_in_epoch"]) == (5, 1, 1)  # 4 steps per epoch
    assert json.loads((tmp_path / "checkpoint-5" / "config.json").read_text())["hidden_size"] == 32


def test_a_crash_while_saving_leaves_the_previous_checkpoint(tmp_path, monkeypatch):
    import bertedu.training.checkpoint as ckpt

    real_save, calls = torch.save, []

    def failing_save(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise OSError("disk full")
        return real_save(*args, **kwargs)

    monkeypatch.setattr(ckpt.torch, "save", failing_save)
    with pytest.raises(OSError, match="disk full"):
        train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=4, save_every=1, out=str(tmp_path)))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["checkpoint-1", "metrics.jsonl"]
    assert load_checkpoint(tmp_path, tiny_model())["step"] == 1


def test_load_checkpoint_errors_say_what_is_wrong(tmp_path):
    train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=1, out=str(tmp_path / "run")))
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_checkpoint(tmp_path / "nowhere", tiny_model())
    with pytest.raises(CheckpointError, match="different model config.*hidden_size"):
        load_checkpoint(tmp_path / "run", BertForPreTraining(tiny_config().replace(hidden_size=64)))
    shutil.copytree(tmp_path / "run" / "checkpoint-1", tmp_path / "broken" / "checkpoint-1")
    (tmp_path / "broken" / "checkpoint-1" / "training_state.pt").unlink()
    with pytest.raises(CheckpointError, match="incomplete.*training_state.pt"):
        load_checkpoint(tmp_path / "broken", tiny_model())
    with pytest.raises(FileExistsError, match="resume=True"):  # a fresh run would overwrite it
        train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=1, out=str(tmp_path / "run")))


def test_rng_state_round_trips_through_a_weights_only_file(tmp_path):
    torch.save(rng_state(), tmp_path / "rng.pt")
    draws = (random.random(), np.random.rand(), torch.rand(3))
    set_rng_state(torch.load(tmp_path / "rng.pt", weights_only=True))
    again = (random.random(), np.random.rand(), torch.rand(3))
    assert draws[:2] == again[:2] and torch.equal(draws[2], again[2])


# ---- metrics, evaluation, precision, compile ---------------------------------------------------
def test_metrics_file_and_plot(tmp_path):
    result = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=6, log_every=2, eval_every=3,
                   out=str(tmp_path)), eval_dataset=ToyPairs(6, seed=1))
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert records == result.records
    train_rows = [r for r in records if "loss" in r]
    assert [r["step"] for r in train_rows] == [2, 4, 6]
    for r in train_rows:
        assert {"step", "loss", "mlm_loss", "nsp_loss", "lr", "tokens_per_s", "grad_norm", "elapsed"} <= set(r)
        assert r["loss"] == pytest.approx(r["mlm_loss"] + r["nsp_loss"], rel=1e-5) and r["tokens_per_s"] > 0
    evals = [r for r in records if "eval_loss" in r]
    assert [r["step"] for r in evals] == [3, 6] and evals[-1]["eval_examples"] == 6
    assert all(0 <= r[k] <= 1 for r in evals for k in ("eval_mlm_accuracy", "eval_nsp_accuracy"))
    png = tmp_path / "curves.png"
    fig = plot_metrics(tmp_path / "metrics.jsonl", png)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 5000
    assert [ax.get_title() for ax in fig.axes] == ["loss", "held-out accuracy"]
    # a run whose evaluations have no accuracy (a distillation run) gets the loss panel alone
    losses_only = [{k: v for k, v in r.items() if "accuracy" not in k} for r in records]
    assert [ax.get_title() for ax in plot_metrics(losses_only, tmp_path / "loss.png").axes] == ["loss"]


def test_evaluate_is_deterministic_and_counts_labelled_positions_only():
    model, data = tiny_model(), ToyPairs(6, seed=2)
    first = evaluate(model, data, collate, batch_size=6, seed=3)
    assert evaluate(model, data, collate, batch_size=6, seed=3) == first
    batch = collate([data[i] for i in range(6)], torch.Generator().manual_seed(batch_seed(3, 0, 0)))
    with torch.no_grad():
        out = model.eval()(**batch)
    labelled = batch["labels"] != -100
    assert labelled.sum() == 6 * K
    mlm_acc = (out.mlm_logits.argmax(-1)[labelled] == batch["labels"][labelled]).float().mean()
    nsp_acc = (out.nsp_logits.argmax(-1) == batch["next_sentence_label"]).float().mean()
    assert first["mlm_accuracy"] == pytest.approx(float(mlm_acc))
    assert first["nsp_accuracy"] == pytest.approx(float(nsp_acc))
    assert first["loss"] == pytest.approx(float(out.loss), rel=1e-6)


def test_compile_failure_falls_back_to_eager(monkeypatch):
    eager = tiny_model()
    train(eager, ToyPairs(8), fixed_collate, config(steps=2))

    def broken_compile(module, *a, **k):
        def run(**batch):
            raise RuntimeError("no compiler here")
        return run

    monkeypatch.setattr(torch, "compile", broken_compile)
    model = tiny_model()
    with pytest.warns(UserWarning, match="eager"):
        train(model, ToyPairs(8), fixed_collate, config(steps=2, compile=True))
    assert all(torch.equal(weights(eager)[k], w) for k, w in weights(model).items())


def test_bf16_on_cpu_runs_the_matmuls_in_bf16_and_keeps_the_loss_within_bf16_precision():
    dtypes = []
    model = tiny_model()
    model.bert.layers[0].feed_forward.dense_in.register_forward_hook(lambda m, i, out: dtypes.append(out.dtype))
    bf16 = train(model, ToyPairs(16), fixed_collate, config(steps=3, precision="bf16"))
    fp32 = train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=3))
    assert dtypes and set(dtypes) == {torch.bfloat16}  # autocast on the CPU, this CPU's bf16 kernels
    assert bf16.loss == pytest.approx(fp32.loss, rel=2e-2)  # the loss itself is computed in fp32


def test_progress_bar_shows_loss_speed_and_eta(capsys):
    train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=3, progress=True))
    err = capsys.readouterr().err
    assert "3/3" in err and "loss=" in err and "tok_s=" in err and "<00:00" in err  # elapsed<remaining
    train(tiny_model(), ToyPairs(16), fixed_collate, config(steps=3, progress=False))
    assert capsys.readouterr().err == ""


# ---- DistributedDataParallel -------------------------------------------------------------------
DDP_SCRIPT = """
import sys
import warnings
sys.path.insert(0, {tests!r})
import torch
torch.set_num_threads(1)
from test_train import ToyPairs, collate, config, fixed_collate, tiny_model
from bertedu.training.loop import train
# two runs in one script (the process group, made by the first, serves both):
# fixed masks, then random masks; batch 4 per process
train(tiny_model(), ToyPairs(24), fixed_collate, config(batch_size=4, steps=3, out=sys.argv[1] + "/fixed"))
train(tiny_model(), ToyPairs(24), collate, config(batch_size=4, steps=3, out=sys.argv[1] + "/random"))
"""


def run_torchrun(script: Path, *args: str, timeout: float = 120) -> None:
    """`torchrun --nproc_per_node=2 --standalone script args` on CPU; kill it all if it hangs."""
    env = {k: v for k, v in os.environ.items() if k not in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "MASTER_PORT")}
    env.update(OMP_NUM_THREADS="1", MASTER_ADDR="127.0.0.1")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node=2", "--standalone", str(script), *args]
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)  # its own process group, so workers die with it
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.communicate()
        pytest.fail(f"torchrun did not finish within {timeout} s")
    assert proc.returncode == 0, err[-3000:]


@pytest.mark.slow
def test_two_processes_match_one_process_with_the_same_global_batch(tmp_path):
    script = tmp_path / "ddp_run.py"
    script.write_text(DDP_SCRIPT.format(tests=str(Path(__file__).parent)))
    run_torchrun(script, str(tmp_path))

    # 2 processes x batch 4 == 1 process x batch 8 (fixed masks: one collate call or two agree)
    single = tiny_model()
    r_single = train(single, ToyPairs(24), fixed_collate, config(batch_size=8, steps=3))
    two = tiny_model(seed=99)
    load_checkpoint(tmp_path / "fixed", two)
    for name, w in weights(single).items():
        torch.testing.assert_close(weights(two)[name], w, atol=1e-5, rtol=0, msg=name)
    ddp_records = read_metrics(tmp_path / "fixed")  # written by process 0 only: 3 lines, not 6
    assert [r["step"] for r in ddp_records] == [1, 2, 3]
    for a, b in zip(ddp_records, r_single.records):
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-5) and a["tokens"] == b["tokens"]

    # random masks: 2 processes x batch 4 == 1 process x batch 4 x 2 micro-batches, because
    # collate's generator is seeded by the slot (micro-batch * world_size + rank)
    accum = tiny_model()
    train(accum, ToyPairs(24), collate, config(batch_size=4, grad_accum_steps=2, steps=3))
    load_checkpoint(tmp_path / "random", two)
    for name, w in weights(accum).items():
        torch.testing.assert_close(weights(two)[name], w, atol=1e-5, rtol=0, msg=name)


def test_bf16_on_a_cpu_without_bf16_instructions_warns_and_fp32_does_not(monkeypatch):
    from bertedu import utils

    monkeypatch.setattr(utils, "cpu_has_bf16", lambda: False)
    with pytest.warns(RuntimeWarning, match="without bf16 instructions"):
        utils.autocast("bf16", torch.device("cpu"))
    monkeypatch.setattr(utils, "cpu_has_bf16", lambda: True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        utils.autocast("bf16", torch.device("cpu"))
        monkeypatch.setattr(utils, "cpu_has_bf16", lambda: False)
        utils.autocast("fp32", torch.device("cpu"))
        utils.autocast("auto", torch.device("cpu"))


NO_NSP_SCRIPT = """
import sys
import torch
torch.set_num_threads(1)
from bertedu.cli import main
# MLM only under torchrun: the NSP head is frozen, so DDP runs without find_unused_parameters
# (with a trainable head and no search DDP fails at the second step's reduction)
sys.exit(main(["pretrain", "--preset", "tiny", "--steps", "3", "--batch-size", "4", "--no-nsp",
               "--corpus", "wiki-en", "--max-documents", "24", "--vocab-size", "1500", "--no-progress",
               "--max-seq-length", "64", "--max-eval-examples", "8", "--out", sys.argv[1] + "/mlm"]))
"""


@pytest.mark.slow
def test_mlm_only_under_torchrun_needs_no_unused_parameter_search(tmp_path):
    script = tmp_path / "no_nsp.py"
    script.write_text(NO_NSP_SCRIPT)
    run_torchrun(script, str(tmp_path), timeout=240)
    assert read_metrics(tmp_path / "mlm")[-1]["step"] == 3


def test_mlm_only_freezes_the_nsp_head_under_several_processes_only(monkeypatch):
    from bertedu.training.pretrain import PretrainConfig, initial_model

    tokenizer = [None] * 100  # initial_model reads only the vocabulary's size
    cfg = PretrainConfig(preset="tiny", nsp=False, steps=1, device="cpu")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert all(p.requires_grad for p in initial_model(cfg, tokenizer).parameters())  # one process: as before
    monkeypatch.setenv("WORLD_SIZE", "2")
    model = initial_model(cfg, tokenizer)
    frozen = {n for n, p in model.named_parameters() if not p.requires_grad}
    assert frozen and all(n.startswith(("nsp.", "bert.pooler.")) for n in frozen)


def test_a_resume_with_another_number_of_processes_fails_in_one_line(tmp_path, monkeypatch):
    """A checkpoint from 2 processes x batch 4, resumed by one process at batch 4: a SettingError
    naming both process counts and the torchrun command, not a traceback about the data position."""
    from bertedu.errors import SettingError
    from bertedu.training import loop

    out = tmp_path / "run"
    train(tiny_model(), ToyPairs(24), fixed_collate, config(steps=2, save_every=2, out=str(out)))
    load = loop._load_newest_intact

    def as_if_two_processes(*args, **kwargs):
        saved = load(*args, **kwargs)
        return {**saved, "rng": saved["rng"] * 2, "global_batch": 2 * saved["global_batch"]}

    monkeypatch.setattr(loop, "_load_newest_intact", as_if_two_processes)
    with pytest.raises(SettingError) as err:
        train(tiny_model(), ToyPairs(24), fixed_collate, config(steps=3, save_every=2, out=str(out)), resume=True)
    message = str(err.value)
    assert "\n" not in message and "written by 2 processes" in message and "this run has 1" in message
    assert "torchrun --nproc-per-node 2" in message


def test_the_resume_command_is_printed_once_with_its_torchrun_prefix(monkeypatch):
    from bertedu.cli import _resume_command

    argv = ["pretrain", "--out", "run", "--resume"]
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert _resume_command("pretrain", argv) == "bertedu pretrain --out run --resume"
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert _resume_command("pretrain", argv) == \
        "torchrun --standalone --nproc-per-node 2 -m bertedu.cli pretrain --out run --resume"


def test_finetune_refuses_several_processes_in_one_line(tmp_path, monkeypatch, capsys):
    from bertedu.cli import main

    monkeypatch.setenv("WORLD_SIZE", "2")
    assert main(["finetune", "--task", "sst2", "--out", str(tmp_path / "ft")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "one process" in err and "started 2" in err
    assert not (tmp_path / "ft").exists()  # refused before anything was written


def test_workers_default_to_none_on_the_cpu_and_several_on_cuda(monkeypatch):
    from bertedu.training.batches import loader_workers

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    assert TrainConfig(steps=1).num_workers is None
    assert loader_workers(None, torch.device("cpu")) == 0  # CPU runs prepare batches as before
    assert loader_workers(None, torch.device("cuda", 0)) == 8
    assert loader_workers(3, torch.device("cuda", 0)) == 3 and loader_workers(2, torch.device("cpu")) == 2
