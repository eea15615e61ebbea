"""Fine-tuning advice, measured (issue 38 item 2, after finetune_forgetting.py's learning rates):
warm-up against none, layer-wise learning-rate decay and freezing the lower layers, and dropout
and weight decay against over-fitting a small training set. One task per call, three seeds.

Study `rate` (the task's finetune_forgetting.py recipe at one peak rate, `RATES`: the best of
its sweep, one step below the rate that destroys the encoder): plain fine-tuning against each
of `RATE_VARIANTS` (--warmup-ratio 0, --layer-lr-decay 0.8, --freeze-layers half the layers),
each scored on the test set and by the forgetting measure (finetune_forgetting.py's: the
masked LM's own head on the fine-tuned encoder, held-out text). The plain runs are the
sweep's own when --out is the sweep's folder (same command, same folder name).

Study `overfit` (`SMALL`: a few hundred training examples for several epochs, dev scored along
the way): the default regularisation (dropout 0.1, weight decay 0.01) against each of
`OVERFIT_VARIANTS`. The curves are the logged training loss (every step, averaged over the
steps since the last dev evaluation; in training mode, so with dropout) against the dev loss
and score at each evaluation; the last weights (the run's final checkpoint) are scored on the
training set in eval mode, beside the last dev score: their gap is the over-fitting.

Each run is one `bertedu finetune` command (printed); a run whose results.json exists is
read, not repeated. The tables give mean ± sample sd over seeds, and each variant's paired
difference from plain (per seed) with its standard error.

    python benchmarks/finetune_advice.py --task topic-en --threads 1 --out runs/forgetting-topic-en --json bertedu/weights/finetune_advice.json
    python benchmarks/finetune_advice.py --task ner-zh --threads 1 --out runs/forgetting-ner-zh --json bertedu/weights/finetune_advice.json
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from finetune_runs import (INITS, RECIPES, machine, masked_accuracy_of, mean_sd, run_finetune, set_threads,
                           shown_command, study_parser, task_score)

RATES = {"topic-en": "5e-4", "ner-zh": "1e-3"}  # the best peak rate of each task's finetune_forgetting sweep


def encoder_layers(task: str) -> int:
    """The encoder layers of the shipped masked LM the task fine-tunes (minilm-mlm: 6, course-zh: 2)."""
    from bertedu.pretrained import masked_lm_dir

    return json.loads((masked_lm_dir(INITS[task]) / "config.json").read_text(encoding="utf-8"))["num_hidden_layers"]


RATE_VARIANTS = {  # name -> flags (a function of the layer count)
    "plain": lambda layers: [],
    "no warm-up": lambda layers: ["--warmup-ratio", "0"],
    "layer-lr-decay 0.8": lambda layers: ["--layer-lr-decay", "0.8"],
    "freeze lower half": lambda layers: ["--freeze-layers", str(layers // 2)],
}
SMALL = {  # a small training set for several epochs, dev scored along the way, the training loss every step
    "topic-en": "--max-train 128 --max-eval 150 --epochs 6 --batch-size 16 --max-seq-length 32 --lr 5e-4 --log-every 1",
    "ner-zh": "--max-train 200 --max-eval 150 --epochs 5 --batch-size 8 --max-seq-length 64 --lr 1e-3 --log-every 1",
}
OVERFIT_VARIANTS = {"dropout 0.1, weight decay 0.01": [], "dropout 0": ["--dropout", "0"],
                    "dropout 0.3": ["--dropout", "0.3"], "weight decay 0.1": ["--weight-decay", "0.1"]}
# left out where a run costs minutes: AdamW's decoupled decay shrinks a weight by lr x wd a step, so 48 steps at
# 5e-4 with 0.1 shrink it by 0.24% in all, against 0.02% at the default 0.01 (ner-zh measures it, at 1e-3 x 125 steps)
OVERFIT_SKIP = {"topic-en": ("weight decay 0.1",)}


def slug(name: str) -> str:
    return "".join(c if c.isalnum() or c == "." else "-" for c in name.split(",")[0])


def paired(values: list[float], plain: list[float]) -> dict:
    """The per-seed differences from plain: mean, sd, standard error and mean / SE."""
    diffs = [v - p for v, p in zip(values, plain)]
    sd = statistics.stdev(diffs) if len(diffs) > 1 else 0.0
    se = sd / len(diffs) ** 0.5
    return {"mean": statistics.mean(diffs), "sd": sd, "se": se,
            "z": statistics.mean(diffs) / se if se > 0 else None}


def rate_study(task: str, args) -> dict:
    init, lr, rows = INITS[task], RATES[task], {}
    for name, flags in RATE_VARIANTS.items():
        if name not in args.variants and name != "plain":
            continue
        extra = flags(encoder_layers(task))
        row = rows[name] = {"flags": " ".join(extra), "task": [], "masked_accuracy": []}
        for seed in args.seeds.split(","):
            out = Path(args.out) / (f"lr{lr}-seed{seed}" if not extra else f"lr{lr}-{slug(name)}-seed{seed}")
            results = run_finetune(task, init, [*RECIPES[task].split(), "--lr", lr, *extra], seed, out, args.extra)
            row["task"].append(task_score(results))
            row["masked_accuracy"].append(masked_accuracy_of(init, out, args.sequences))
    for row in rows.values():
        row["vs_plain"] = {k: paired(row[k], rows["plain"][k]) for k in ("task", "masked_accuracy")}
    before = masked_accuracy_of(init, None, args.sequences)
    print(f"\n{task} from {init} at peak lr {lr}; held-out masked-token accuracy before fine-tuning "
          f"{before:.3f}\n\n| variant | test score | minus plain (SE) "
          "| masked-token accuracy after | minus plain (SE) |\n|---|--:|--:|--:|--:|")
    for name, row in rows.items():
        d = row["vs_plain"]
        print(f"| {name} | {mean_sd(row['task'])} | {d['task']['mean']:+.3f} ({d['task']['se']:.3f}) "
              f"| {mean_sd(row['masked_accuracy'])} | {d['masked_accuracy']['mean']:+.3f} "
              f"({d['masked_accuracy']['se']:.3f}) |")
    return {"init": init, "lr": lr, "sequences": args.sequences,
            "masked_accuracy_before": before, "variants": rows,
            "finetune": f"bertedu finetune --task {task} --init {init} {RECIPES[task]} --lr {lr} FLAGS --seed SEED"}


def curves(out: Path) -> dict:
    """The run's training loss (mean over the steps since the previous dev evaluation) and its
    dev loss and main metric at each evaluation, from metrics.jsonl."""
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    metric = json.loads((out / "results.json").read_text())["main_metric"]
    steps, train, dev_loss, dev_score, window = [], [], [], [], []
    for r in records:
        if "eval_loss" in r:
            steps.append(r["step"])
            train.append(statistics.mean(window))
            dev_loss.append(r["eval_loss"])
            dev_score.append(r[f"eval_{metric}"])
            window = []
        elif r.get("loss") is not None:
            window.append(r["loss"])
    return {"step": steps, "train_loss": train, "dev_loss": dev_loss, "dev_score": dev_score}


def last_weights_on_training_set(out: Path) -> dict:
    """The run's last weights (its final checkpoint) scored on its own training examples in
    eval mode: {"score", "loss"}."""
    from bertedu.data.task_data import load_task
    from bertedu.training.checkpoint import latest_checkpoint, load_weights
    from bertedu.training.finetune import FinetuneConfig, load_finetuned, predict, task_io

    model, tokenizer, _ = load_finetuned(out)
    load_weights(latest_checkpoint(out), model)
    results = json.loads((out / "results.json").read_text())
    cfg = FinetuneConfig(**results["config"])
    task = load_task(cfg.task, seed=cfg.data_seed).subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    io = task_io(task, tokenizer, cfg)
    predictions, loss = predict(model.eval(), io, task.train, cfg.batch_size)
    return {"score": io.score(task.train, predictions)[results["main_metric"]], "loss": loss}


def overfit_study(task: str, args) -> dict:
    rows = {}
    for name, extra in OVERFIT_VARIANTS.items():
        if name not in args.variants or name in OVERFIT_SKIP.get(task, ()):
            continue
        row = rows[name] = {"flags": " ".join(extra), "train_last": [], "dev_last": [], "dev_best": [], "test": [],
                            "curves": []}
        for seed in args.seeds.split(","):
            out = Path(args.out) / f"small-{slug(name)}-seed{seed}"
            results = run_finetune(task, INITS[task], [*SMALL[task].split(), *extra], seed, out, args.extra)
            row["curves"].append(curves(out))
            row["train_last"].append(last_weights_on_training_set(out)["score"])
            row["dev_last"].append(row["curves"][-1]["dev_score"][-1])
            row["dev_best"].append(max(row["curves"][-1]["dev_score"]))
            row["test"].append(task_score(results))
    plain = next(iter(rows.values()))
    for row in rows.values():
        row["gap"] = [t - d for t, d in zip(row["train_last"], row["dev_last"])]
        row["vs_plain"] = {k: paired(row[k], plain[k]) for k in ("test", "gap")}
    print(f"\n{task} from {INITS[task]}, small training set: {SMALL[task]}\n\n| regularisation | training set, last "
          "weights | dev, last weights | gap | test (best dev weights) | minus default (SE) |\n|---|--:|--:|--:|--:|--:|")
    for name, row in rows.items():
        d = row["vs_plain"]["test"]
        print(f"| {name} | {mean_sd(row['train_last'])} | {mean_sd(row['dev_last'])} | {mean_sd(row['gap'])} "
              f"| {mean_sd(row['test'])} | {d['mean']:+.3f} ({d['se']:.3f}) |")
    return {"init": INITS[task], "variants": rows,
            "finetune": f"bertedu finetune --task {task} --init {INITS[task]} {SMALL[task]} FLAGS --seed SEED"}


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="topic-en", choices=sorted(RATES))
    parser.add_argument("--studies", default="overfit,rate")
    parser.add_argument("--sequences", type=int, default=128, help="held-out sequences for the masked accuracy")
    parser.add_argument("--variants", default=";".join([*RATE_VARIANTS, *OVERFIT_VARIANTS]),
                        help="the variants to run, ';' between names (plain and the default regularisation always)")
    args = parser.parse_args()
    args.variants = [*args.variants.split(";"), "plain", next(iter(OVERFIT_VARIANTS))]
    set_threads(args.threads)
    studies = {"overfit": overfit_study, "rate": rate_study}
    entry = {name: studies[name](args.task, args) for name in args.studies.split(",")}
    if args.json:
        path = Path(args.json)
        record = json.loads(path.read_text()) if path.exists() else {}
        record[args.task] = {**record.get(args.task, {}), **entry, "seeds": [int(s) for s in args.seeds.split(",")],
                             "command": shown_command(Path(__file__).name), "machine": machine()}
        path.write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
