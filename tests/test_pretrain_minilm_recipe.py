"""The minilm-mlm recipe on `bertedu pretrain`'s shared loop is the recipe of the separate
pipeline that made the shipped weights (`python -m bertedu.training.mlm_adapt train`).

Both are fed the same batches (those mlm_adapt draws) from the same start and run 20 steps;
on the CPU every step's loss, gradients (after clipping), learning rates and the weights
after the update are bit for bit the same (`torch.equal`), and so are the held-out measures
at steps 10 and 20. The start: a small BertModel stands in for all-MiniLM-L6-v2
(`bertedu.interop.load_minilm` patched, so the test takes seconds); each path gives it fresh
heads from seed 0, the decoder bias from the unigram frequencies of the training text, and
freezes the word embeddings, each with its own code. The new path runs with --seed 2: the
loop seeds dropout from --seed, mlm_adapt from seed + 2 (the head stays seed 0's, patched in).
"""

import json
import os
from pathlib import Path

import pytest
import torch
from torch.nn.modules.module import register_module_forward_hook
from torch.optim.optimizer import register_optimizer_step_post_hook, register_optimizer_step_pre_hook

import bertedu.interop
import bertedu.training.pretrain as pretrain_module
from bertedu.model.config import BertConfig
from bertedu.model.encoder import BertModel
from bertedu.model.heads import BertForPreTraining
from bertedu.training.pretrain import PretrainConfig, pretrain

STEPS, BATCH, LENGTH, WARMUP = 20, 4, 64, 5
FIXTURE = Path(__file__).parent / "data" / "minilm_recipe_reference.json"


def tiny_minilm() -> BertModel:
    """A small stand-in for all-MiniLM-L6-v2: MiniLM's vocabulary, 2 layers of 32, the same weights every call."""
    torch.manual_seed(123)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    return BertModel(config).eval()


class StepRecorder:
    """Every training step of whichever loop runs inside it: the loss, the gradients the
    optimiser reads (after clipping), each parameter's learning rate, the weights after."""

    def __init__(self):
        self.model, self.losses, self.grads, self.lrs, self.weights = None, [], [], [], []

    def __enter__(self):
        self.handles = [register_module_forward_hook(self._forward), register_optimizer_step_pre_hook(self._before),
                        register_optimizer_step_post_hook(self._after)]
        return self

    def __exit__(self, *exc):
        for handle in self.handles:
            handle.remove()

    def _forward(self, module, args, output):
        if isinstance(module, BertForPreTraining) and module.training:
            self.model = module
            self.losses.append(output.loss.detach().clone())

    def _named(self, optimizer):
        names = {id(p): n for n, p in self.model.named_parameters()}
        return [(names[id(p)], p, g["lr"]) for g in optimizer.param_groups for p in g["params"]]

    def _before(self, optimizer, args, kwargs):
        named = self._named(optimizer)
        self.grads.append({n: p.grad.clone() for n, p, _ in named if p.grad is not None})
        self.lrs.append({n: lr for n, p, lr in named if p.grad is not None})

    def _after(self, optimizer, args, kwargs):
        self.weights.append({n: p.detach().clone() for n, p in self.model.named_parameters() if p.requires_grad})


def new_config(out, **changes) -> PretrainConfig:
    """The recipe as `bertedu pretrain` options, at the test's small size."""
    return PretrainConfig(**{**dict(
        out=str(out), init_from="minilm", packing="documents", nsp=False, freeze_word_embeddings=True,
        unigram_bias=True, corpus="wiki-en", max_seq_length=LENGTH, batch_size=BATCH, steps=STEPS, lr=2e-4,
        head_lr=2e-3, warmup_steps=WARMUP, warmup_offset=1, eval_every=10, max_eval_examples=8, seed=2,
        precision="fp32", progress=False, log_every=1), **changes})


def run_new_path(out, monkeypatch, batches):
    """`pretrain` with the recipe's options, fed `batches` (input_ids, attention_mask, labels) in order,
    the heads drawn from seed 0; returns (StepRecorder, training sequences, eval records)."""
    replay = iter(batches)
    monkeypatch.setattr(pretrain_module, "documents_collate", lambda cfg, tokenizer: lambda sequences, generator: dict(
        zip(("input_ids", "attention_mask", "labels"), next(replay))))
    fresh_heads = pretrain_module.minilm_with_fresh_heads
    monkeypatch.setattr(pretrain_module, "minilm_with_fresh_heads", lambda seed, attn: fresh_heads(0, attn))
    data = []
    document_data = pretrain_module.document_data
    monkeypatch.setattr(pretrain_module, "document_data", lambda *a: data.append(document_data(*a)) or data[-1])
    with StepRecorder() as new:
        pretrain(new_config(out))
    records = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    evals = [(r["step"], r["eval_mlm_accuracy"], r["eval_loss"]) for r in records if "eval_loss" in r]
    return new, data[0][0], evals


@pytest.fixture
def one_thread():
    """A model this small runs fastest on one thread (and two wait on each other on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def test_the_shared_loop_runs_mlm_adapts_recipe_bit_for_bit(tmp_path, monkeypatch, one_thread):
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer
    from bertedu.training import mlm_adapt

    monkeypatch.setattr(bertedu.interop, "load_minilm", tiny_minilm)
    drawn, sequences = [], []  # mlm_adapt's training batches (with the mask generator's state), its sequences
    make_batch, training_sequences = mlm_adapt.make_batch, mlm_adapt.training_sequences

    def recording_make_batch(batch, tokenizer, generator, **options):
        state = generator.get_state()
        made = make_batch(batch, tokenizer, generator, **options)
        if options:  # a training batch (the held-out measure passes no options)
            drawn.append((batch, state, options, made))
        return made

    monkeypatch.setattr(mlm_adapt, "make_batch", recording_make_batch)
    monkeypatch.setattr(mlm_adapt, "training_sequences", lambda *a: sequences.extend(training_sequences(*a)) or sequences)
    with StepRecorder() as old:
        mlm_adapt.train(mlm_adapt.AdaptConfig(
            out=str(tmp_path / "old"), corpora=("wiki-en",), steps=STEPS, batch_size=BATCH, max_seq_length=LENGTH,
            lr=2e-4, head_lr=2e-3, warmup_ratio=WARMUP / STEPS, eval_every=10, eval_sequences=8, seed=0,
            threads=1, progress=False))
    old_records = [json.loads(line) for line in (tmp_path / "old" / "metrics.jsonl").read_text().splitlines()]
    assert len(drawn) == len(old.losses) == len(old.weights) == STEPS

    new, new_sequences, new_evals = run_new_path(tmp_path / "new", monkeypatch, [made for *_, made in drawn])
    assert new_sequences == sequences  # the same documents, cut the same way
    assert len(new.losses) == len(new.weights) == STEPS
    for step in range(STEPS):
        assert torch.equal(old.losses[step], new.losses[step]), step
        assert old.grads[step].keys() == new.grads[step].keys() and "mlm.dense.weight" in old.grads[step]
        assert "bert.embeddings.word_embeddings.weight" not in old.grads[step]  # frozen in both
        assert old.lrs[step] == new.lrs[step], step
        for name in old.grads[step]:
            assert torch.equal(old.grads[step][name], new.grads[step][name]), (step, name)
        assert old.weights[step].keys() == new.weights[step].keys()
        for name in old.weights[step]:
            assert torch.equal(old.weights[step][name], new.weights[step][name]), (step, name)
    assert [old.lrs[s]["mlm.dense.weight"] for s in (0, 4, 5)] == pytest.approx([2e-3 / 5, 2e-3, 2e-3])
    assert [(r["step"], r["heldout_accuracy"], r["heldout_loss"]) for r in old_records if r["step"]] == new_evals

    # The new path's own collate draws what mlm_adapt's did, from a generator in the same state.
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    monkeypatch.undo()  # the real documents_collate again
    collate = pretrain_module.documents_collate(new_config(tmp_path), tokenizer)
    for batch, state, _, made in drawn:
        generator = torch.Generator()
        generator.set_state(state)
        assert all(torch.equal(a, b) for a, b in zip(collate(batch, generator).values(), made))

    if os.environ.get("BERTEDU_RECORD_MINILM_RECIPE"):  # tests/data/minilm_recipe_reference.json, from this run
        index = {id(s): i for i, s in enumerate(sequences)}
        write_fixture(reference(old, [[index[id(s)] for s in batch] for batch, *_ in drawn], old_records))


def reference(run: StepRecorder, indices: list[list[int]], records: list[dict]) -> dict:
    """What the fixture keeps of a run: its batches (sequence indices; masks from one generator
    seeded 1, batch after batch), per step the loss, the head's and the encoder's learning rate
    and each gradient's norm, the weights' norms after steps 1, 10 and 20, the held-out measures."""
    names = sorted(run.grads[0])
    return {
        "indices": indices, "mask_seed": 1, "tensors": names,
        "losses": [float(x) for x in run.losses],
        "head_lr": [lrs["mlm.dense.weight"] for lrs in run.lrs],
        "encoder_lr": [lrs["bert.layers.0.output_norm.weight"] for lrs in run.lrs],
        "grad_norms": [[float(grads[n].norm()) for n in names] for grads in run.grads],
        "weight_norms": {str(s): [float(run.weights[s - 1][n].norm()) for n in names] for s in (1, 10, 20)},
        "heldout": [[r["step"], r["heldout_accuracy"], r["heldout_loss"]] for r in records if r["step"]],
    }


def write_fixture(content: dict) -> None:
    """One line a key: small, and a diff shows which numbers moved."""
    lines = [f" {json.dumps(k)}: {json.dumps(v)}" for k, v in content.items()]
    FIXTURE.write_text("{\n" + ",\n".join(lines) + "\n}\n")
