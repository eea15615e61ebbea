"""`bertedu finetune`'s outputs as a cluster job's: written atomically, a finished folder
refused unless --overwrite, and SIGINT / SIGTERM resumable (--resume) bit for bit."""

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import list_checkpoints, open_atomic
from bertedu.cli import main
from bertedu.pretrained import minilm_vocab_path

ROOT = Path(__file__).resolve().parent.parent
WORDS = "good bad fine dull great awful warm cold bright grim".split()


@pytest.fixture(scope="module")
def task_and_vocab(tmp_path_factory):
    """An SST-2 style folder (sentence<TAB>label; 96 train, 24 dev rows) and a fixed vocabulary."""
    folder = tmp_path_factory.mktemp("task")
    rng = random.Random(0)
    for split, n in (("train", 96), ("dev", 24)):
        rows = []
        for i in range(n):
            words = [rng.choice(WORDS[i % 2::2]) for _ in range(6)]  # label 1: even words, 0: odd ones
            rows.append(f"{' '.join(words)}\t{1 - i % 2}\n")
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(rows), encoding="utf-8")
    vocab = folder.parent / "vocab.txt"
    vocab.write_text("\n".join(minilm_vocab_path().read_text(encoding="utf-8").split("\n")[:3000]) + "\n",
                     encoding="utf-8")
    return folder, vocab


def _args(task, vocab, out, *more):
    return ["finetune", "--task", str(task), "--init", "random", "--preset", "tiny", "--vocab", str(vocab),
            "--steps", "12", "--eval-every", "3", "--batch-size", "4", "--max-seq-length", "16", "--log-every", "1",
            "--no-progress", "--out", str(out), *more]


def test_open_atomic_leaves_the_old_file_when_writing_fails(tmp_path):
    path = tmp_path / "results.json"
    path.write_text("old\n")
    with pytest.raises(RuntimeError):
        with open_atomic(path) as f:
            f.write("half of the new")
            raise RuntimeError("disk full")
    assert path.read_text() == "old\n" and [p.name for p in tmp_path.iterdir()] == ["results.json"]
    with open_atomic(path) as f:
        f.write("new\n")
    assert path.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["results.json"]
    with pytest.raises(RuntimeError):
        with open_atomic(path, binary=True) as f:
            f.write(b"\x00half")
            raise RuntimeError("disk full")
    assert path.read_text() == "new\n" and [p.name for p in tmp_path.iterdir()] == ["results.json"]
    with open_atomic(path, binary=True) as f:
        f.write(b"\x00\x01")
    assert path.read_bytes() == b"\x00\x01"


def test_a_finished_folder_is_refused_unless_overwrite(task_and_vocab, tmp_path, capsys):
    task, vocab = task_and_vocab
    out = tmp_path / "run"
    assert main(_args(task, vocab, out, "--steps", "2")) == 0
    capsys.readouterr()
    names = sorted(p.name for p in out.iterdir())
    assert names == ["checkpoint-2", "identity.json", "metrics.jsonl", "metrics.png", "model", "predictions_dev.jsonl",
                     "results.json", "vocab.txt"]  # no temporaries, no lock, no best/ left
    (out / "notes.txt").write_text("mine")
    assert main(_args(task, vocab, out, "--steps", "2")) == 2
    assert "holds a finished fine-tuning run (results.json)" in capsys.readouterr().err
    assert main(_args(task, vocab, out, "--steps", "3", "--overwrite")) == 0
    assert json.loads((out / "results.json").read_text())["steps"] == 3
    assert (out / "notes.txt").read_text() == "mine"  # only the run's own files were replaced
    assert [p.name for p in list_checkpoints(out)] == ["checkpoint-3"]


def _bertedu(args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "bertedu.cli", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT)


@pytest.mark.slow
def test_sigterm_then_resume_gives_the_uninterrupted_results(task_and_vocab, tmp_path):
    task, vocab = task_and_vocab
    whole = tmp_path / "whole"
    proc = _bertedu(_args(task, vocab, whole))
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]

    out = tmp_path / "run"
    proc = _bertedu(_args(task, vocab, out))
    deadline = time.monotonic() + 300
    while not ((out / "metrics.jsonl").exists() and (out / "metrics.jsonl").read_text().strip()):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()[1][-2000:]
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 143, err[-2000:]
    assert not (out / "results.json").exists() and "Traceback" not in err
    resume = err.strip().splitlines()[-1].removeprefix("resume with: ")
    assert resume.endswith("--resume")

    proc = _bertedu(resume.split()[1:])
    _, err = proc.communicate(timeout=600)
    assert proc.returncode == 0, err[-2000:]
    a, b = (json.loads((run / "results.json").read_text()) for run in (whole, out))
    for key in ("dev", "evaluations", "best_step", "steps", "stopped_early"):
        assert a[key] == b[key], key
    wa, wb = (load_file(str(run / "model" / "model.safetensors")) for run in (whole, out))
    assert all(torch.equal(wa[k], wb[k]) for k in wa)
    assert (whole / "predictions_dev.jsonl").read_text() == (out / "predictions_dev.jsonl").read_text()
