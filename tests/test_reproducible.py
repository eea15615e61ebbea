"""Same command, same seed, same run: `bertedu pretrain` and `bertedu finetune` in fresh
processes give bit-identical weights on CPU, and a crashed run continued with --resume ends
exactly where the uninterrupted one does."""

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import list_checkpoints
from bertedu.pretrained import minilm_vocab_path

pytestmark = pytest.mark.slow  # seconds to a minute each: deselected by the quick tier (-m 'not slow')

PRETRAIN = ["pretrain", "--preset", "tiny", "--corpus", "wiki-en", "--max-documents", "24", "--max-seq-length", "32",
            "--batch-size", "4", "--steps", "6", "--save-every", "1", "--keep-checkpoints", "10", "--log-every", "1",
            "--max-eval-examples", "8", "--no-progress", "--seed", "3"]


def bertedu(*argvs: list[str]) -> None:
    """Run the command line in fresh processes (each its own global RNG, nothing shared with us
    or with each other), one per argv, all at once: with one thread each, the processes share a
    2-core machine's cores rather than each waiting for the last to end."""
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    with contextlib.ExitStack() as stack:
        logs = [stack.enter_context(tempfile.TemporaryFile("w+")) for _ in argvs]  # no pipe to fill while we wait
        procs = [subprocess.Popen([sys.executable, "-m", "bertedu.cli", *argv], stdout=subprocess.DEVNULL,
                                  stderr=log, text=True, env=env) for argv, log in zip(argvs, logs)]
        try:
            for proc in procs:
                proc.wait(timeout=600)
        finally:
            for proc in procs:
                proc.kill()  # only one still running (after a timeout): an ended process is left alone
                proc.wait()
        for proc, log in zip(procs, logs):
            log.seek(0)
            assert proc.returncode == 0, log.read()[-2000:]


def weights(folder) -> dict[str, torch.Tensor]:
    return load_file(str(folder / "model.safetensors"))


def optimizer_tensors(checkpoint) -> list[torch.Tensor]:
    state = torch.load(checkpoint / "training_state.pt", weights_only=True)["optimizer"]["state"]
    return [t for s in state.values() for t in s.values() if torch.is_tensor(t)]


def assert_identical(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        assert torch.equal(a[name], b[name]), f"{name} differs"


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
    # a fixed vocabulary: training one is not deterministic in tie order (tokenizers#1794)
    return str(minilm_vocab_path())


@pytest.fixture(scope="module")
def runs(tmp_path_factory, vocab):
    """The pretrain command twice ("a", "b") and with another seed for one step ("seed-4"): three
    processes at once."""
    root = tmp_path_factory.mktemp("runs")
    bertedu([*PRETRAIN, "--vocab", vocab, "--out", str(root / "a")],
            [*PRETRAIN, "--vocab", vocab, "--out", str(root / "b")],
            [*PRETRAIN[:-2], "--seed", "4", "--steps", "1", "--vocab", vocab, "--out", str(root / "seed-4")])
    return root


@pytest.fixture(scope="module")
def first_run(runs):
    return runs / "a"


def test_the_same_pretrain_command_twice_gives_bit_identical_checkpoints(first_run, runs):
    again = runs / "b"
    for a, b in zip(list_checkpoints(first_run), list_checkpoints(again), strict=True):
        # every tensor equal bit for bit (the file's bytes can differ: safetensors stores its
        # metadata dict in no fixed order)
        assert_identical(weights(a), weights(b))
        for x, y in zip(optimizer_tensors(a), optimizer_tensors(b), strict=True):
            assert torch.equal(x, y)


def test_another_seed_gives_other_initial_weights(first_run, runs):
    other = runs / "seed-4"
    a, b = weights(list_checkpoints(first_run)[0]), weights(list_checkpoints(other)[0])
    assert not torch.equal(a["bert.embeddings.word_embeddings.weight"], b["bert.embeddings.word_embeddings.weight"])


def test_a_crashed_run_resumed_from_its_last_checkpoint_ends_bit_identical(first_run, vocab, tmp_path):
    crashed = tmp_path / "crashed"
    shutil.copytree(first_run, crashed)
    for checkpoint in list_checkpoints(crashed)[2:]:  # the process died after writing step 2
        shutil.rmtree(checkpoint)
    assert [c.name for c in list_checkpoints(crashed)] == ["checkpoint-1", "checkpoint-2"]
    bertedu([*PRETRAIN, "--vocab", vocab, "--out", str(crashed), "--resume"])
    final, resumed = list_checkpoints(first_run)[-1], list_checkpoints(crashed)[-1]
    assert final.name == resumed.name == "checkpoint-6"
    assert_identical(weights(final), weights(resumed))
    for x, y in zip(optimizer_tensors(final), optimizer_tensors(resumed), strict=True):
        assert torch.equal(x, y)


def test_the_same_finetune_command_twice_gives_bit_identical_weights(tmp_path):
    argv = ["finetune", "--task", "ner-en", "--init", "random", "--preset", "tiny", "--steps", "4",
            "--batch-size", "8", "--max-train", "32", "--max-eval", "8", "--max-seq-length", "32",
            "--no-progress", "--seed", "5"]
    bertedu([*argv, "--out", str(tmp_path / "a")], [*argv, "--out", str(tmp_path / "b")])
    assert_identical(weights(tmp_path / "a" / "model"), weights(tmp_path / "b" / "model"))
    assert (tmp_path / "a" / "predictions_test.jsonl").read_text() == (tmp_path / "b" / "predictions_test.jsonl").read_text()


def test_the_same_pretrain_command_without_a_vocabulary_gives_the_same_vocabulary_and_weights(tmp_path):
    """No --vocab: each run trains its own WordPiece vocabulary on wiki-en (8,000 pieces), in its
    own process. `tokenizers`' trainer alone orders the `##` characters by a hash map's order, and
    so some merges, differently in each process (263 lines moved, losses apart from step 10);
    `build_vocab` fixes those ids, so the two files and the two runs are the same bit for bit."""
    argv = ["pretrain", "--preset", "tiny", "--corpus", "wiki-en", "--max-seq-length", "32", "--batch-size", "4",
            "--steps", "3", "--max-eval-examples", "8", "--no-progress", "--seed", "0"]
    bertedu([*argv, "--out", str(tmp_path / "a")], [*argv, "--out", str(tmp_path / "b")])
    a, b = (tmp_path / name / "vocab.txt" for name in "ab")
    assert len(a.read_text(encoding="utf-8").splitlines()) == 8000
    assert a.read_bytes() == b.read_bytes()
    assert_identical(weights(list_checkpoints(tmp_path / "a")[-1]), weights(list_checkpoints(tmp_path / "b")[-1]))
