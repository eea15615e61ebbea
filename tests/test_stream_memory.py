"""`bertedu pretrain --stream` on a file of a few hundred MB stays in bounded memory.

The examples are built one shard of documents at a time and trained from memory-mapped
files (bertedu.data.stream), so the peak resident memory must not grow with the input:
a 300 MB BERT-format file is pretrained (5 steps) under a stated bound, and within a small
margin of the peak for a 10 MB file. benchmarks/RESULTS.md has the measurement at three
sizes (`benchmarks/stream_memory.py`).

The text is made of long words that are single pieces of the vocabulary, so that the
tokenizer (the slow part) has few tokens to make per byte and the test stays within
minutes on a 2-core CPU; memory is per token and per shard, not per byte, so this is
the harder case for the bound per MB, not an easier one.
"""

import os
import random
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bertedu.pretrained import minilm_vocab_path

ROOT = Path(__file__).resolve().parent.parent
BOUND_MIB = 1500  # peak resident memory of the whole `bertedu pretrain` process
GROWTH_MIB = 150  # allowed growth of the peak from 10 MB to 300 MB of input

# Run the command as a child of a small Python, which reports the child's peak RSS (KiB).
PEAK = ("import resource, subprocess, sys; r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "sys.stderr.write(r.stderr[-2000:]); "
        "print(r.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def write_corpus(path: Path, size_mb: int) -> None:
    vocab = set(minilm_vocab_path().read_text(encoding="utf-8").split("\n"))
    words = [w for w in ("international", "administration", "representatives", "responsibilities", "organization",
                         "communication", "environmental", "understanding", "performance", "professional",
                         "development", "independence", "significantly", "approximately", "construction")
             if w in vocab]
    rng = random.Random(0)
    block = "".join("\n".join(" ".join(rng.choices(words, k=24)) + " ." for _ in range(12)) + "\n\n"
                    for _ in range(200))  # 200 documents of 12 sentences
    with open(path, "w", encoding="utf-8") as f:
        while f.tell() < size_mb * 2**20:
            f.write(block)


def start_pretrain(corpus: Path, out: Path) -> subprocess.Popen:
    """`bertedu pretrain --stream` on `corpus`, under the small Python that reports its peak RSS."""
    cmd = [sys.executable, "-m", "bertedu.cli", "pretrain", "--stream", "--corpus", str(corpus), "--preset", "tiny",
           "--vocab", "minilm", "--steps", "5", "--batch-size", "8", "--max-seq-length", "128",
           "--max-eval-examples", "32", "--shard-documents", "500", "--no-progress", "--out", str(out)]
    # the reporter writes to its pipes only once its child has ended: no pipe fills while another run is read
    return subprocess.Popen([sys.executable, "-c", PEAK, *cmd], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, cwd=ROOT, start_new_session=True)


def peak_rss_mib(proc: subprocess.Popen) -> float:
    stdout, stderr = proc.communicate(timeout=3600)
    status, kib = stdout.split()
    assert status == "0", stderr
    return int(kib) / 1024


@pytest.mark.slow  # about a minute on the 2-core course machine
def test_a_few_hundred_mb_stream_in_bounded_memory(tmp_path):
    small, big = tmp_path / "small.txt", Path("/tmp") / f"bertedu-stream-test-{random.getrandbits(32):08x}.txt"
    write_corpus(small, 10)
    write_corpus(big, 300)
    runs = []
    try:
        assert big.stat().st_size >= 300 * 2**20
        # The two runs at once, each its own process (ru_maxrss is per process): the small one
        # uses the core the big one leaves idle while it builds a shard's pairs in Python.
        runs = [start_pretrain(big, tmp_path / "big"), start_pretrain(small, tmp_path / "small")]
        peak_big, peak_small = [peak_rss_mib(run) for run in runs]
    finally:
        for run in runs:
            if run.poll() is None:  # still going after a failure: stop it and the run it started
                os.killpg(run.pid, signal.SIGKILL)
                run.wait()
        big.unlink()
    assert peak_big < BOUND_MIB, peak_big
    assert peak_big - peak_small < GROWTH_MIB, (peak_small, peak_big)
