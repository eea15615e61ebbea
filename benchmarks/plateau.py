"""Past the plateau: finished `bertedu pretrain` runs against what the neighbours alone give.

For each run folder: its held-out MLM accuracy and its training and held-out MLM loss
against the step, and, as dotted lines in its colour, the held-out accuracy of the
count-based predictors (`bertedu.course.ngram.count_baselines`: the most frequent token, the
left neighbour, both neighbours) on exactly the run's held-out examples and masks.
Writes figures/pretrain_plateau.png and prints a markdown table (one row per run).

    python benchmarks/plateau.py runs/course-en-tiny runs/course-zh-tiny
    python benchmarks/plateau.py --cross-masks runs/a runs/b   # each run on both held-out mask kinds
    python benchmarks/plateau.py --cross-packing runs/a runs/b # ... on sentence pairs and on packed blocks
    python benchmarks/plateau.py --words runs/a runs/b         # per whole word: runs with different vocabularies
    python benchmarks/plateau.py --held-out-as whole_word=false packing=pairs -- runs/a  # on another run's task
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))


def read_run(folder: Path) -> dict:
    from bertedu.training.pretrain import PretrainConfig
    from bertedu.course.ngram import count_baselines

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


def held_out_accuracy(folder: Path, model, tokenizer, **changes) -> float:
    """The run's held-out MLM accuracy on examples made with its run.json settings, `changes` applied
    (same documents and seed; the run's precision)."""
    from bertedu.data import collate_pretraining
    from bertedu.training.pretrain import heldout_dataset
    from bertedu.training.loop import evaluate

    cfg = changed_config(folder, **changes)
    return evaluate(model, heldout_dataset(cfg, tokenizer),
                    lambda examples, _: collate_pretraining(examples, pad_token_id=tokenizer.pad_token_id),
                    cfg.batch_size, cfg.seed, precision=cfg.precision)["mlm_accuracy"]


def changed_config(folder: Path, **changes):
    from bertedu.training.pretrain import PretrainConfig

    settings = json.loads((folder / "run.json").read_text())
    return PretrainConfig(**{**settings, "vocab": str(folder / "vocab.txt"), "out": None, **changes})


def cross(folders: list[str], kind: str) -> None:
    """Each run's last checkpoint on its held-out documents made into examples both ways of
    `CROSSES[kind]` (masks per token and per whole word, or sentence pairs and packed blocks;
    same documents and seed; the run's precision), as a markdown table."""
    from bertedu.training.pretrain import load_pretrained

    field, values, columns = CROSSES[kind]
    print(f"| run | held-out MLM acc., {columns[0]} | held-out MLM acc., {columns[1]} |\n|---|--:|--:|")
    for folder in map(Path, folders):
        model, tokenizer = load_pretrained(folder)
        scores = [held_out_accuracy(folder, model, tokenizer, **{field: value}) for value in values]
        print(f"| {folder.name} | {scores[0]:.3f} | {scores[1]:.3f} |")


def held_out_as(folders: list[str], overrides: list[str]) -> None:
    """Each run's last checkpoint on held-out examples made with some of its settings changed
    (`whole_word=false packing=pairs`: the task of a run that had those settings), a markdown table."""
    from bertedu.training.pretrain import load_pretrained

    changes = {}
    for item in overrides:
        key, _, value = item.partition("=")
        try:
            changes[key] = json.loads(value)
        except json.JSONDecodeError:
            changes[key] = value
    print(f"| run | held-out MLM acc. with {' '.join(overrides)} |\n|---|--:|")
    for folder in map(Path, folders):
        model, tokenizer = load_pretrained(folder)
        print(f"| {folder.name} | {held_out_accuracy(folder, model, tokenizer, **changes):.3f} |")


def masked_words(labels: list[int], tokenizer) -> list[list[int]]:
    """The positions of each masked word in one example's labels (-100: not masked): a run of
    masked positions whose later labels are `##` continuation pieces is one word."""
    words: list[list[int]] = []
    for position, label in enumerate(labels):
        if label == -100:
            continue
        continues = tokenizer.convert_ids_to_tokens(label).startswith("##")
        if continues and words and words[-1][-1] == position - 1:
            words[-1].append(position)
        else:
            words.append([position])
    return words


def word_table(folders: list[str]) -> None:
    """Accuracy per whole word, which compares runs with different vocabularies (accuracy per
    piece does not: a smaller vocabulary cuts words into more, easier pieces). Each run's last
    checkpoint on its held-out documents with whole-word masks, the same documents and seed
    for every run: a masked word counts as right when every one of its pieces is the top
    prediction. Also: the vocabulary's pieces per word on those documents, and the run's speed."""
    import torch

    from bertedu.data import collate_pretraining
    from bertedu.training.pretrain import heldout_dataset, load_pretrained
    from bertedu.utils import autocast, eval_mode

    print("| run | vocabulary | pieces per word | held-out MLM acc. per piece, token masks | "
          "per piece, whole-word masks | **per word, whole-word masks** (words) | tokens/s |\n"
          "|---|--:|--:|--:|--:|--:|--:|")
    for folder in map(Path, folders):
        model, tokenizer = load_pretrained(folder)
        token_masks = held_out_accuracy(folder, model, tokenizer, whole_word=False)
        cfg = changed_config(folder, whole_word=True)
        dataset = heldout_dataset(cfg, tokenizer)
        right = total = pieces_right = pieces_masked = pieces = heads = 0
        with eval_mode(model), torch.no_grad():
            for start in range(0, len(dataset), cfg.batch_size):
                examples = [dataset[i] for i in range(start, min(start + cfg.batch_size, len(dataset)))]
                batch = collate_pretraining(examples, pad_token_id=tokenizer.pad_token_id)
                with autocast(cfg.precision, torch.device("cpu")):
                    predicted = model(**batch).mlm_logits.argmax(-1)
                masked = batch["labels"] != -100
                pieces_right += int((predicted == batch["labels"])[masked].sum())
                pieces_masked += int(masked.sum())
                for row, labels in enumerate(batch["labels"].tolist()):
                    for word in masked_words(labels, tokenizer):
                        total += 1
                        right += all(predicted[row, p] == labels[p] for p in word)
                    # pieces per word over the whole example: the original pieces, masked or not
                    original = [label if label != -100 else token
                                for token, label in zip(batch["input_ids"][row].tolist(), labels)]
                    text = tokenizer.convert_ids_to_tokens([i for i in original if i not in tokenizer.special_ids])
                    pieces += len(text)
                    heads += sum(not t.startswith("##") for t in text)
        metrics = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines()]
        last = [m for m in metrics if "tokens" in m][-1]
        print(f"| {folder.name} | {len(tokenizer):,} | {pieces / max(heads, 1):.2f} | {token_masks:.3f} | "
              f"{pieces_right / max(pieces_masked, 1):.3f} | **{right / max(total, 1):.3f}** ({total:,}) | "
              f"{last['tokens'] / last['elapsed']:,.0f} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("runs", nargs="+")
    parser.add_argument("--figure", default=None, help="default: figures/pretrain_plateau.png")
    parser.add_argument("--cross-masks", action="store_true", help="only the table of each run on both mask kinds")
    parser.add_argument("--cross-packing", action="store_true",
                        help="only the table of each run on both example kinds (pairs, FULL-SENTENCES; MLM-only runs)")
    parser.add_argument("--words", action="store_true",
                        help="only the table of each run's accuracy per whole word (runs with different vocabularies)")
    parser.add_argument("--held-out-as", nargs="+", default=None, metavar="SETTING=VALUE",
                        help="only the table of each run on held-out examples made with these run.json settings "
                             "changed (end the list with --)")
    args = parser.parse_args()
    if args.held_out_as:
        held_out_as(args.runs, args.held_out_as)
        return
    if args.words:
        word_table(args.runs)
        return
    for kind in CROSSES:
        if getattr(args, f"cross_{kind}"):
            cross(args.runs, kind)
            return
    from bertedu.course.viz import figures_dir

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
