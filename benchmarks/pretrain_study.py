"""What each lever buys a CPU pretraining run: one `bertedu pretrain` command per row, the
same budget for each, their held-out MLM curves on one plot and a table.

Each row is a complete command (printed in the table), run in its own process one after
the other, so every run has the machine to itself (besides whatever else the machine does:
the time budget makes tokens/s, and so tokens seen, depend on it; the curves are plotted
against tokens seen for that reason). All runs of a study read one vocabulary file, built
once, so their accuracies are comparable (a WordPiece vocabulary trained by `tokenizers`
differs slightly from run to run).

    python benchmarks/pretrain_study.py --budget 10m --threads 1 --out runs/study-en
    python benchmarks/pretrain_study.py --lang zh --budget 10m --out runs/study-zh
    python benchmarks/pretrain_study.py --rows baseline,bf16 --budget 2m   # a subset
    python benchmarks/pretrain_study.py --report-only --out runs/study-en   # table + plot again

Writes OUT/<row>/ (each run's folder), OUT/study.json, OUT/study.md (the table) and
figures/pretrain_study_<lang>.png.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path

# name -> (what changes, flags added to the common command)
ROWS = {
    "baseline": ("fp32, NSP on, 128 tokens, batch 32, lr 1e-3", []),
    "bf16": ("+ bf16 autocast on the CPU", ["--precision", "bf16"]),
    "no-nsp": ("+ MLM only (no NSP)", ["--precision", "bf16", "--no-nsp"]),
    "seq64": ("+ 64 tokens a sequence", ["--precision", "bf16", "--no-nsp", "--max-seq-length", "64"]),
    "batch64": ("+ batch 64, lr 2e-3", ["--precision", "bf16", "--no-nsp", "--max-seq-length", "64",
                                         "--batch-size", "64", "--lr", "2e-3"]),
    "tiny": ("seq64 row, tiny model (2 x 128)", ["--precision", "bf16", "--no-nsp", "--max-seq-length", "64",
                                                 "--preset", "tiny"]),
    "small": ("seq64 row, small model (4 x 512)", ["--precision", "bf16", "--no-nsp", "--max-seq-length", "64",
                                                   "--preset", "small"]),
    "whole-word": ("seq64 row, whole-word masking", ["--precision", "bf16", "--no-nsp", "--max-seq-length", "64",
                                                     "--whole-word"]),
}
CORPUS = {"en": "wiki-en", "zh": "peoples-daily-zh"}


def common_command(args, vocab: Path, out: Path) -> list[str]:
    return ["bertedu", "pretrain", "--preset", "mini", "--corpus", CORPUS[args.lang], "--vocab", str(vocab),
            "--batch-size", "32", "--lr", "1e-3", "--warmup-ratio", "0.06", "--time-budget", args.budget,
            "--eval-every", str(args.eval_every), "--max-eval-examples", "512", "--no-progress",
            "--seed", "0", "--out", str(out)]


def build_vocab(args, out: Path) -> Path:
    """One vocabulary for every row: a one-step run trains it (English) or counts characters (Chinese)."""
    vocab = out / "vocab.txt"
    if not vocab.exists():
        scratch = out / "_vocab-run"
        subprocess.run([sys.executable, "-m", "bertedu.cli", "pretrain", "--preset", "tiny",
                        "--corpus", CORPUS[args.lang], "--steps", "1", "--batch-size", "2", "--no-progress",
                        "--max-eval-examples", "2", "--out", str(scratch)], check=True, capture_output=True)
        vocab.write_bytes((scratch / "vocab.txt").read_bytes())
    return vocab


def run_row(args, name: str, vocab: Path) -> None:
    folder = Path(args.out) / name
    if (folder / "metrics.jsonl").exists() and not args.again:
        print(f"{name}: already run, kept (--again to redo)", flush=True)
        return
    command = common_command(args, vocab, folder) + ROWS[name][1]
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    print(f"{name}: {' '.join(command)}", flush=True)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "bertedu.cli", *command[1:]], env=env, capture_output=True,
                          text=True)
    (folder / "command.txt").write_text(" ".join(command) + "\n")
    if done.returncode != 0:
        print(done.stderr[-3000:], file=sys.stderr)
        raise SystemExit(f"{name} failed")
    print(f"{name}: done in {time.perf_counter() - start:.0f} s", flush=True)


def summarise(args) -> list[dict]:
    rows = []
    for name in ROWS:
        folder = Path(args.out) / name
        if not (folder / "metrics.jsonl").exists():
            continue
        records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
        train = [r for r in records if "loss" in r]
        evals = [r for r in records if "eval_mlm_accuracy" in r]
        tokens = {r["step"]: r["tokens"] for r in train}
        last = train[-1]
        rows.append({
            "row": name, "change": ROWS[name][0], "command": (folder / "command.txt").read_text().strip(),
            "steps": last["step"], "tokens": last["tokens"], "minutes": round(last["elapsed"] / 60, 1),
            "tokens_per_s": round(last["tokens"] / max(last["elapsed"], 1e-9)),
            "train_mlm_loss": round(last["mlm_loss"], 3), "eval_mlm_loss": round(evals[-1]["eval_mlm_loss"], 3),
            "eval_mlm_accuracy": round(evals[-1]["eval_mlm_accuracy"], 3),
            "best_eval_mlm_accuracy": round(max(r["eval_mlm_accuracy"] for r in evals), 3),
            "curve": [(tokens.get(r["step"], 0), r["eval_mlm_accuracy"], r["eval_mlm_loss"]) for r in evals],
            "train_curve": [(r["tokens"], r["mlm_loss"]) for r in train],
        })
    return rows


def report(args, rows: list[dict]) -> None:
    out = Path(args.out)
    (out / "study.json").write_text(json.dumps(rows, indent=1) + "\n")
    lines = ["| row | change | steps | tokens | tok/s | train MLM loss | held-out MLM loss | held-out MLM acc (best) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['row']} | {r['change']} | {r['steps']:,} | {r['tokens'] / 1e6:.2f}M | "
                     f"{r['tokens_per_s']:,} | {r['train_mlm_loss']} | {r['eval_mlm_loss']} | "
                     f"{r['eval_mlm_accuracy']} ({r['best_eval_mlm_accuracy']}) |")
    (out / "study.md").write_text("\n".join(lines) + "\n\nCommands:\n\n" +
                                  "\n".join(f"- {r['row']}: `{r['command']}`" for r in rows) + "\n")
    print("\n".join(lines))
    plot(args, rows)


def plot(args, rows: list[dict]) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    from bertedu.course.viz import figures_dir

    fig = Figure(figsize=(11, 4))
    FigureCanvasAgg(fig)
    ax_acc, ax_loss = fig.subplots(1, 2)
    for i, r in enumerate(rows):
        colour = f"C{i}"
        tok, acc, loss = zip(*r["curve"])
        ax_acc.plot([t / 1e6 for t in tok], acc, marker="o", ms=3, color=colour, label=r["row"])
        ax_loss.plot([t / 1e6 for t in tok], loss, marker="o", ms=3, color=colour, label=f"{r['row']} held-out")
        ttok, tloss = zip(*r["train_curve"])
        ax_loss.plot([t / 1e6 for t in ttok], tloss, color=colour, alpha=0.35, lw=1)
    ax_acc.set(xlabel="training tokens (millions)", ylabel="held-out MLM accuracy",
               title=f"{CORPUS[args.lang]}: held-out masked-token accuracy")
    ax_loss.set(xlabel="training tokens (millions)", ylabel="MLM loss",
                title="MLM loss: training (faint) and held-out (dots)")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    path = figures_dir() / f"pretrain_study_{args.lang}.png"
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    print(f"figure: {path}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--lang", choices=sorted(CORPUS), default="en")
    parser.add_argument("--rows", default=",".join(ROWS), help=f"comma-separated, of: {', '.join(ROWS)}")
    parser.add_argument("--budget", default="10m", help="wall-clock budget of each run (bertedu's --time-budget)")
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=None, help="default runs/study-<lang>")
    parser.add_argument("--again", action="store_true", help="rerun rows that already have results")
    parser.add_argument("--report-only", action="store_true")
    args = parser.parse_args()
    args.out = args.out or f"runs/study-{args.lang}"
    Path(args.out).mkdir(parents=True, exist_ok=True)
    if not args.report_only:
        vocab = build_vocab(args, Path(args.out))
        for name in args.rows.split(","):
            run_row(args, name, vocab)
    report(args, summarise(args))


if __name__ == "__main__":
    main()
