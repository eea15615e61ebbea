"""A run's learning curves: metrics.jsonl (one JSON record a line, written by the loop as it
goes), read back, and drawn as a PNG beside the run.

Here in `training/` because every job draws its run's curves as it ends; `bertedu.course.viz`
shows the same picture in the notebooks.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Sequence

METRICS_NAME = "metrics.jsonl"


def read_metrics(path: str | os.PathLike) -> list[dict]:
    """The records of a metrics.jsonl file (or of the one inside an output directory)."""
    path = Path(path)
    if path.is_dir():
        path = path / METRICS_NAME
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def append_metrics(out_dir: str | os.PathLike, record: dict) -> None:
    """Append one JSON record a line to out_dir/metrics.jsonl."""
    with open(Path(out_dir) / METRICS_NAME, "a") as f:
        f.write(json.dumps(record) + "\n")


def plot_metrics(path_or_records: str | os.PathLike | Sequence[dict], out_png: str | os.PathLike):
    """Loss curves (train, held-out) and held-out accuracies against step, saved as a PNG.

    Draws on a bare matplotlib Figure with the Agg canvas, so it neither needs a display
    nor changes the backend a notebook uses. Returns the Figure.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    is_path = isinstance(path_or_records, (str, os.PathLike))
    records = read_metrics(path_or_records) if is_path else list(path_or_records)
    train = [r for r in records if "loss" in r]
    evals = [r for r in records if "eval_loss" in r]
    accuracies = [("eval_mlm_accuracy", "MLM accuracy"), ("eval_nsp_accuracy", "NSP accuracy"), ("eval_accuracy", "accuracy")]
    has_accuracy = any(r.get(key) is not None for r in evals for key, _ in accuracies)
    fig = Figure(figsize=(10, 4) if has_accuracy else (5.5, 4))  # no empty panel (a distillation run has none)
    FigureCanvasAgg(fig)
    ax_loss, ax_acc = fig.subplots(1, 2) if has_accuracy else (fig.subplots(1, 1), None)
    for key, label, rows in [("loss", "train loss", train), ("mlm_loss", "train MLM loss", train),
                             ("nsp_loss", "train NSP loss", train), ("eval_loss", "held-out loss", evals)]:
        points = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
        if points:
            ax_loss.plot(*zip(*points), label=label, marker="o" if rows is evals else None)
    for key, label in accuracies if has_accuracy else []:
        points = [(r["step"], r[key]) for r in evals if r.get(key) is not None]
        if points:
            ax_acc.plot(*zip(*points), label=label, marker="o")
    ax_loss.set(xlabel="step", ylabel="loss", title="loss")
    if has_accuracy:
        ax_acc.set(xlabel="step", ylabel="accuracy", title="held-out accuracy", ylim=(0, 1))
    for ax in (ax_loss, ax_acc) if has_accuracy else (ax_loss,):
        if ax.get_legend_handles_labels()[0]:
            ax.legend()
        ax.grid(alpha=0.3)
    fig.tight_layout()
    Path(out_png).parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_png, dpi=100)
    return fig
