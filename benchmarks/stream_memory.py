"""Peak memory of `bertedu pretrain --stream` against the size of a BERT-format text file.

For each size, writes a BERT-format file (one sentence per line, a blank line between
documents: the embedded Wikipedia's sentences, repeated with each document numbered so no
two are the same) under a scratch folder, runs

    bertedu pretrain --stream --corpus FILE --preset tiny --vocab minilm --steps 5 ...

in a child process, samples its resident memory and how far it has read into the file
every 10 s (/proc), reads its peak resident memory (VmHWM, getrusage's ru_maxrss), and
deletes the file and the run. Prints one JSON record per size. On a slow or busy machine
`--time-limit S` stops each run after S seconds (SIGTERM) and reports how much of the file
it had read: memory against input read is then the measurement.

    python benchmarks/stream_memory.py --sizes-mb 256 1024 2048 --scratch /tmp/bertedu-mem
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path


def write_corpus(path: Path, size_bytes: int) -> int:
    """A BERT-format file of at least `size_bytes`; returns the number of documents."""
    from bertedu.data.corpora import wiki_en

    documents = [doc for doc in wiki_en() if doc]
    n = 0
    with open(path, "w", encoding="utf-8") as f:
        while f.tell() < size_bytes:
            for doc in documents:
                f.write(f"Document {n} .\n" + "\n".join(doc) + "\n\n")
                n += 1
                if f.tell() >= size_bytes:
                    break
    return n


def _proc_status(pid: int) -> dict[str, int]:
    """VmRSS, VmHWM (peak resident memory), RssAnon (the process's own memory) and RssFile
    (pages of files it has mapped: the memory-mapped example store, libraries; the kernel
    can drop them at any time) of a live process, in KiB."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                out[key] = int(value.split()[0])
    return out


def _read_position(pid: int, path: Path) -> int | None:
    """How far the process has read into `path` (its file offset), if it has it open."""
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in fd_dir.iterdir():
        try:
            if os.readlink(fd) == str(path):
                for line in open(f"/proc/{pid}/fdinfo/{fd.name}"):
                    if line.startswith("pos:"):
                        return int(line.split()[1])
        except OSError:
            continue
    return None


def measure(size_mb: int, scratch: Path, extra: list[str], time_limit: float | None) -> dict:
    corpus, out = scratch / f"corpus-{size_mb}mb.txt", scratch / f"run-{size_mb}mb"
    shutil.rmtree(out, ignore_errors=True)
    documents = write_corpus(corpus, size_mb * 2**20)
    cmd = [sys.executable, "-m", "bertedu.cli", "pretrain", "--stream", "--corpus", str(corpus), "--preset", "tiny",
           "--vocab", "minilm", "--steps", "5", "--batch-size", "8", "--max-seq-length", "128",
           "--max-eval-examples", "64", "--no-progress", "--out", str(out), *extra]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    samples, read, peak, anon, files = [], 0, 0, 0, 0  # samples: (MiB of input read, RssAnon MiB), every 10 s
    while proc.poll() is None:
        try:
            status = _proc_status(proc.pid)
            read = max(read, _read_position(proc.pid, corpus) or 0)
        except OSError:  # it just ended
            break
        peak = max(peak, status.get("VmHWM", 0))
        anon, files = max(anon, status.get("RssAnon", 0)), max(files, status.get("RssFile", 0))
        samples.append((round(read / 2**20), round(status.get("RssAnon", 0) / 1024)))
        if time_limit and time.perf_counter() - start > time_limit:
            proc.send_signal(signal.SIGTERM)  # stop: what was read so far is the measurement
            proc.wait()
            break
        time.sleep(10)
    _, err = proc.communicate()
    elapsed = time.perf_counter() - start
    # the child's peak over its whole life (getrusage: largest finished child, KiB on Linux)
    peak_kib = max(peak, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)
    meta = out / "examples" / "meta.json"
    completed = proc.returncode == 0
    record = {"size_mb": round(corpus.stat().st_size / 2**20), "documents": documents,
              "read_mb": round(corpus.stat().st_size / 2**20) if completed else round(read / 2**20),
              "completed": completed, "examples": json.loads(meta.read_text()).get("examples") if meta.exists() else None,
              "peak_rss_mib": round(peak_kib / 1024), "peak_anon_mib_sampled": round(anon / 1024),
              "peak_file_mib_sampled": round(files / 1024), "elapsed_s": round(elapsed), "returncode": proc.returncode,
              "anon_by_read_mb": samples[:: max(1, len(samples) // 12)] + samples[-1:]}
    if proc.returncode not in (0, -signal.SIGTERM, 128 + signal.SIGTERM):
        record["stderr"] = err[-2000:]
    corpus.unlink()
    shutil.rmtree(out, ignore_errors=True)
    return record


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes-mb", type=int, nargs="+", default=[256, 1024, 2048])
    parser.add_argument("--scratch", type=Path, default=Path("/tmp/bertedu-stream-memory"))
    parser.add_argument("--time-limit", type=float, default=None,
                        help="stop a run (SIGTERM) after this many seconds and report how much of the file it read")
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)  # internal: measure one size
    args, extra = parser.parse_known_args()
    args.scratch.mkdir(parents=True, exist_ok=True)
    if args.one:
        print(json.dumps(measure(args.sizes_mb[0], args.scratch, extra, args.time_limit)), flush=True)
        return
    for size in args.sizes_mb:  # each size in its own interpreter: ru_maxrss is per process tree
        limit = ["--time-limit", str(args.time_limit)] if args.time_limit else []
        subprocess.run([sys.executable, __file__, "--one", "--sizes-mb", str(size), "--scratch", str(args.scratch),
                        *limit, *extra], check=True)
    shutil.rmtree(args.scratch, ignore_errors=True)


if __name__ == "__main__":
    main()
