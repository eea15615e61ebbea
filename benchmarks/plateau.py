"""Past the plateau: finished `bertedu pretrain` runs against what the neighbours alone give.

For each run folder: its held-out MLM accuracy and its training and held-out MLM loss
against the step, and, as dotted lines in its colour, the held-out accuracy of the
count-based predictors (`bertedu.pretrain.count_baselines`: the most frequent token, the
left neighbour, both neighbours) on exactly the run's held-out examples and masks.
Writes figures/pretrain_plateau.png and prints a markdown table (one row per run).

    python benchmarks/plateau.py runs/course-en-tiny runs/course-zh-tiny
    python benchmarks/plateau.py --cross-masks runs/a runs/b   # each run on both held-out mask kinds
    python benchmarks/plateau.py --cross-packing runs/a runs/b # ... on sentence pairs and on packed blocks
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def read_run(folder: Path) -> dict:
    from bertedu.pretrain import PretrainConfig, count_baselines

    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    settings = json.loads((folder / "run.json").read_text())
    cfg = PretrainConfig(**{**settings, "vocab": str(folder / "vocab.txt"), "out": None})
    return {
        "name": folder.name, "settings": settings,
        "train": [(r["step"], r["mlm_loss"]) for r in records if r.get("mlm_loss") is not None],
        "eval": [(r["step"], r["eval_mlm_accuracy"], r["eval_mlm_loss"]) for r in records if "eval_mlm_accuracy" in r],
        "last": [r for r in records if "loss" in r][-1],
        "baselines": count_baselines(cfg),
    }


def plot(runs: list[dict], path: Path) -> None:
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(12, 4 + 0.12 * 4 * len(runs)))  # room below for the legends
    FigureCanvasAgg(fig)
    ax_acc, ax_loss = fig.subplots(1, 2)
    drawn = []  # runs with the same held-out examples and training counts share one set of count lines
    for i, run in enumerate(runs):
        colour = f"C{i}"
        steps, acc, loss = zip(*run["eval"])
        ax_acc.plot(steps, acc, marker="o", ms=3, color=colour, label=f"{run['name']}: held-out")
        if run["baselines"] not in drawn:
            drawn.append(run["baselines"])
            for style, key in ((":", "unigram"), ("-.", "left"), ("--", "left+right")):
                ax_acc.axhline(run["baselines"][key], color=colour, ls=style, lw=1,
                               label=f"{run['name']}: counts, {key} ({run['baselines'][key]:.3f})")
        train_steps, train_loss = zip(*run["train"])
        ax_loss.plot(train_steps, train_loss, color=colour, alpha=0.35, lw=1, label=f"{run['name']}: training")
        ax_loss.plot(steps, loss, marker="o", ms=3, color=colour, label=f"{run['name']}: held-out")
    ax_acc.set(xlabel="step", ylabel="held-out MLM accuracy", title="masked-token accuracy (lines: count predictors)")
    ax_loss.set(xlabel="step", ylabel="MLM loss", title="MLM loss: training (faint) and held-out")
    for ax in (ax_acc, ax_loss):
        ax.grid(alpha=0.3)
        ax.legend(fontsize=6, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2, frameon=False)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)


CROSSES = {  # --cross-X: the run.json setting that changes, its values, and the column names
    "masks": ("whole_word", (False, True), ("token masks", "whole-word masks")),
    "packing": ("packing", ("pairs", "full-sentences"), ("sentence-pair examples", "FULL-SENTENCES blocks")),
}


def cross(folders: list[str], kind: str) -> None:
    """Each run's last checkpoint on its held-out documents made into examples both ways of
    `CROSSES[kind]` (masks per token and per whole word, or sentence pairs and packed blocks;
    same documents and seed; the run's precision), as a markdown table."""
    from bertedu.data import collate_pretraining
    from bertedu.pretrain import PretrainConfig, heldout_dataset, load_pretrained
    from bertedu.train import evaluate

    field, values, columns = CROSSES[kind]
    print(f"| run | held-out MLM acc., {columns[0]} | held-out MLM acc., {columns[1]} |\n|---|--:|--:|")
    for folder in map(Path, folders):
        model, tokenizer = load_pretrained(folder)
        settings = json.loads((folder / "run.json").read_text())
        scores = []
        for value in values:
            cfg = PretrainConfig(**{**settings, "vocab": str(folder / "vocab.txt"), "out": None, field: value})
            result = evaluate(model, heldout_dataset(cfg, tokenizer),
                              lambda examples, _: collate_pretraining(examples, pad_token_id=tokenizer.pad_token_id),
                              cfg.batch_size, cfg.seed, precision=cfg.precision)
            scores.append(result["mlm_accuracy"])
        print(f"| {folder.name} | {scores[0]:.3f} | {scores[1]:.3f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--figure", default=None, help="default: figures/pretrain_plateau.png")
    parser.add_argument("--cross-masks", action="store_true", help="only the table of each run on both mask kinds")
    parser.add_argument("--cross-packing", action="store_true",
                        help="only the table of each run on both example kinds (pairs, FULL-SENTENCES; MLM-only runs)")
    args = parser.parse_args()
    for kind in CROSSES:
        if getattr(args, f"cross_{kind}"):
            cross(args.runs, kind)
            return
    from bertedu.viz import figures_dir

    runs = [read_run(Path(folder)) for folder in args.runs]
    print("| run | steps | tokens | minutes | held-out MLM acc. (step) | counts: unigram / left / both neighbours |")
    print("|---|--:|--:|--:|---|---|")
    for run in runs:
        best = max(run["eval"], key=lambda e: e[1])
        last, b = run["last"], run["baselines"]
        print(f"| {run['name']} | {last['step']:,} | {last['tokens'] / 1e6:.1f}M | {last['elapsed'] / 60:.0f} | "
              f"{run['eval'][-1][1]:.3f} (best {best[1]:.3f} at {best[0]:,}) | "
              f"{b['unigram']:.3f} / {b['left']:.3f} / {b['left+right']:.3f} |")
    path = Path(args.figure) if args.figure else figures_dir() / "pretrain_plateau.png"
    plot(runs, path)
    print(f"figure: {path}")


if __name__ == "__main__":
    main()
