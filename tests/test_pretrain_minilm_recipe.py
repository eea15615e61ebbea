"""The minilm-mlm recipe on `bertedu pretrain`'s shared loop is the recipe of the separate
pipeline that made the shipped weights (`python -m bertedu.training.mlm_adapt train`, removed).

Before mlm_adapt was removed, this file ran both, fed the same batches (those mlm_adapt drew)
from the same start, for 20 steps: every step's loss, gradients (after clipping), learning
rates and the weights after the update were bit for bit the same on the CPU (`torch.equal`),
and so were the held-out measures at steps 10 and 20 (git 040ae08,
test_the_shared_loop_runs_mlm_adapts_recipe_bit_for_bit). That run also recorded
tests/data/minilm_recipe_reference.json: its batches (the indices of the training sequences;
the masks came from one generator seeded 1, batch after batch), and per step the loss, the
head's and the encoder's learning rate and each gradient's norm, the weights' norms after
steps 1, 10 and 20, the held-out measures. The test below runs the new path on those batches
and compares within 1e-5: another CPU kind (AVX2 against AVX-512) rounds differently, so not
bit for bit across machines.

The start: a small BertModel stands in for all-MiniLM-L6-v2 (`bertedu.interop.load_minilm`
patched, so the test takes seconds); the new path gives it fresh heads from seed 0 (as
mlm_adapt did with its --seed 0), the decoder bias from the unigram frequencies of the
training text, and freezes the word embeddings. It runs with --seed 2: the loop seeds dropout
from --seed, mlm_adapt seeded it from seed + 2.
"""

import json
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
BATCH_KEYS = ("input_ids", "attention_mask", "labels")


def tiny_minilm() -> BertModel:
    """A small stand-in for all-MiniLM-L6-v2: MiniLM's vocabulary, 2 layers of 32, the same weights every call."""
    torch.manual_seed(123)
    config = BertConfig(vocab_size=30522, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    return BertModel(config).eval()


@pytest.fixture
def one_thread():
    """A model this small runs fastest on one thread (and two wait on each other on a busy machine)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


class StepRecorder:
    """Every training step of the loop that runs inside it: the loss, the gradients the
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
    """The recipe as `bertedu pretrain` options, at the test's small size (mlm_adapt's
    --warmup-ratio 0.25 of 20 steps is --warmup-steps 5 counted from the first update)."""
    return PretrainConfig(**{**dict(
        out=str(out), init_from="minilm", packing="documents", nsp=False, freeze_word_embeddings=True,
        unigram_bias=True, corpus="wiki-en", max_seq_length=LENGTH, batch_size=BATCH, steps=STEPS, lr=2e-4,
        head_lr=2e-3, warmup_steps=WARMUP, warmup_offset=1, eval_every=10, max_eval_examples=8, seed=2,
        precision="fp32", progress=False, log_every=1), **changes})


def run_new_path(out, monkeypatch, batches_from):
    """`pretrain` with the recipe's options, the heads drawn from seed 0, fed the batches
    `batches_from(training sequences)` yields, (input_ids, attention_mask, labels) in order.
    Returns (StepRecorder, eval records as (step, accuracy, loss))."""
    data, replay = [], []
    document_data = pretrain_module.document_data
    monkeypatch.setattr(pretrain_module, "document_data", lambda *a: data.append(document_data(*a)) or data[-1])

    def replay_collate(cfg, tokenizer):
        def collate(sequences, generator):  # the loop's examples and generator go unused
            if not replay:
                replay.append(batches_from(data[0][0]))
            return dict(zip(BATCH_KEYS, next(replay[0])))
        return collate

    monkeypatch.setattr(pretrain_module, "documents_collate", replay_collate)
    fresh_heads = pretrain_module.minilm_with_fresh_heads
    monkeypatch.setattr(pretrain_module, "minilm_with_fresh_heads", lambda seed, attn: fresh_heads(0, attn))
    with StepRecorder() as run:
        pretrain(new_config(out))
    records = [json.loads(line) for line in (Path(out) / "metrics.jsonl").read_text().splitlines()]
    return run, [(r["step"], r["eval_mlm_accuracy"], r["eval_loss"]) for r in records if "eval_loss" in r]


@pytest.mark.slow
def test_the_recipe_reproduces_the_recorded_mlm_adapt_run(tmp_path, monkeypatch, one_thread):
    """The new path on mlm_adapt's recorded batches gives its recorded numbers (within 1e-5)."""
    from bertedu.data.documents import make_batch
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    recorded = json.loads(FIXTURE.read_text())
    monkeypatch.setattr(bertedu.interop, "load_minilm", tiny_minilm)
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")

    def mlm_adapts_batches(sequences):
        masks = torch.Generator().manual_seed(recorded["mask_seed"])  # one generator, batch after batch
        for indices in recorded["indices"]:
            yield make_batch([sequences[i] for i in indices], tokenizer, masks)

    run, evals = run_new_path(tmp_path / "new", monkeypatch, mlm_adapts_batches)
    close = dict(rel=1e-5, abs=1e-7)
    assert [float(x) for x in run.losses] == pytest.approx(recorded["losses"], **close)
    assert [lrs["mlm.dense.weight"] for lrs in run.lrs] == pytest.approx(recorded["head_lr"], rel=1e-12)
    encoder = "bert.layers.0.output_norm.weight"
    assert [lrs[encoder] for lrs in run.lrs] == pytest.approx(recorded["encoder_lr"], rel=1e-12)
    names = recorded["tensors"]
    assert "mlm.dense.weight" in names and "bert.embeddings.word_embeddings.weight" not in names  # frozen
    assert [sorted(grads) for grads in run.grads] == [names] * STEPS
    for step, norms in enumerate(recorded["grad_norms"]):
        assert [float(run.grads[step][n].norm()) for n in names] == pytest.approx(norms, **close), step
    for step, norms in recorded["weight_norms"].items():
        assert [float(run.weights[int(step) - 1][n].norm()) for n in names] == pytest.approx(norms, **close), step
    assert [step for step, *_ in evals] == [step for step, *_ in recorded["heldout"]] == [10, 20]
    for (_, accuracy, loss), (_, want_accuracy, want_loss) in zip(evals, recorded["heldout"]):
        assert accuracy == pytest.approx(want_accuracy, abs=0.01) and loss == pytest.approx(want_loss, **close)


def test_the_recipes_collate_masks_every_batch_from_the_loops_generator(tmp_path):
    """--packing documents: the collate pads and masks (15%, 80/10/10) with every draw from the
    generator the loop seeds for the micro-batch: the same generator state, the same batch."""
    from bertedu.data.documents import make_batch
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    collate = pretrain_module.documents_collate(new_config(tmp_path), tokenizer)
    sequences = [[101, *range(2000, 2000 + n), 102] for n in (30, 12, 50)]
    batch = collate(sequences, torch.Generator().manual_seed(7))
    assert list(batch) == list(BATCH_KEYS) and batch["input_ids"].shape == (3, 52)
    again = make_batch(sequences, tokenizer, torch.Generator().manual_seed(7))
    assert all(torch.equal(a, b) for a, b in zip(batch.values(), again))
    other = collate(sequences, torch.Generator().manual_seed(8))
    assert not torch.equal(batch["labels"], other["labels"])
