"""Does a CRF help BERT tag entities? Fine-tune the same encoder with the softmax head and
with `--head crf` (same recipe, same steps, same seeds) and compare the test entity F1, the
invalid BIO sequences and the boundary errors (bertedu.training.metrics.tagging_errors).

Each run is one `bertedu finetune` command (printed), one after the other; a run whose
results.json exists is read, not repeated. A third row takes each softmax run's weights and
decodes its test set again under the BIO constraints alone (a CRF whose transition scores
are all 0: Viterbi then picks the valid sequence of highest summed log-probability), to tell
what the constraints buy from what the learned transitions add. The table gives mean ±
sample standard deviation over the seeds, and the F1 gap (CRF minus softmax) with the
standard deviation of the per-seed gaps (a seed gives both heads the same classifier, data
order and dropout).

    python benchmarks/crf_gap.py --tasks ner-zh,ner-en --seeds 0,1,2 --out runs/crf-gap --json bertedu/weights/crf_gap.json

Each task fine-tunes the course's own pretrained model for its language by default (ner-zh
from course-zh, ner-en from course-en; `--init` replaces both) with the recipe of
benchmarks/finetune_gap.py's record (docs/pretraining.md): ner-en for 10 epochs, the
lengthening its record needed to find any entity. `--json FILE` writes the per-seed
numbers, the commands and the machine (merged into an existing file).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from finetune_runs import finetune_command, machine, run_finetune, set_threads, study_parser

# task -> (default init, the flags of its CPU-sized fine-tune: finetune_gap.py's recorded recipes)
TASKS = {
    "ner-zh": ("course-zh", "--max-train 4000 --max-eval 300 --epochs 1 --batch-size 8 --lr 1e-3 "
                            "--max-seq-length 64 --eval-every 125"),
    "ner-en": ("course-en", "--max-train 2000 --max-eval 300 --epochs 10 --batch-size 16 --lr 1e-3 "
                            "--max-seq-length 64"),
}
HEADS = ("softmax", "crf")
ROWS = ("softmax", "softmax_constrained", "crf")  # the middle one: softmax weights, constrained decoding
SCORES = ("f1", "precision", "recall")
COUNTS = ("invalid_sequences", "stray_inside_tags", "boundary_errors", "type_errors", "spurious_entities",
          "missed_entities", "predicted_entities")


def run_dir(out: str, task: str, init: str, head: str, seed: str) -> Path:
    return Path(out) / f"{task}-{init.replace('/', '_')}-{head}-{seed}"


def run_one(task: str, init: str, head: str, seed: str, args) -> tuple[str, dict]:
    """(the command, less --seed and --out; the run's test numbers), running it unless done."""
    flags = [*TASKS[task][1].split(), "--head", head]
    results = run_finetune(task, init, flags, seed, run_dir(args.out, task, init, head, seed), args.extra)
    test = results["test"]
    numbers = {**{k: test[k] for k in SCORES}, **{k: test["errors"][k] for k in COUNTS}, "best_step": results["best_step"],
               "steps": results["steps"], "elapsed_s": round(results["elapsed_s"], 1)}
    return " ".join(finetune_command(task, init, flags, args.extra)) + " --seed SEED", numbers


def constrained_decoding(out: Path) -> dict:
    """The test numbers of the softmax run in `out` decoded again under the BIO constraints
    alone: its weights with a CRF of zero transition scores attached (no training)."""
    from bertedu.data.task_data import load_task
    from bertedu.model.crf import LinearChainCRF
    from bertedu.training.finetune import FinetuneConfig, load_finetuned, predict, task_io

    model, tokenizer, info = load_finetuned(out)
    model.crf = LinearChainCRF(model.num_labels, info["labels"])  # transitions 0: the constraints only
    cfg = FinetuneConfig(**json.loads((out / "results.json").read_text())["config"])
    task = load_task(cfg.task, seed=cfg.data_seed).subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    io = task_io(task, tokenizer, cfg)
    predictions, _ = predict(model, io, task.test, cfg.batch_size)
    test = io.score(task.test, predictions)
    return {**{k: test[k] for k in SCORES}, **{k: test["errors"][k] for k in COUNTS}}


def summary(values: list[float]) -> dict:
    return {"mean": statistics.mean(values), "sd": statistics.stdev(values) if len(values) > 1 else 0.0}


def print_table(record: dict) -> None:
    print("\n| task (init) | head | test entity F1 | invalid sequences | boundary errors | type errors | "
          "spurious | predicted entities |\n|---|---|--:|--:|--:|--:|--:|--:|")
    for key, r in record.items():
        for head in ROWS:
            runs = r[head]
            f1 = [x["f1"] for x in runs]
            cell = lambda k: f"{statistics.mean(x[k] for x in runs):.1f} ({', '.join(str(x[k]) for x in runs)})"  # noqa: E731
            print(f"| {r['task']} ({r['init']}) | {head} | {statistics.mean(f1):.3f} ± {r['summary'][head]['f1']['sd']:.3f} "
                  f"({', '.join(f'{x:.3f}' for x in f1)}) | {cell('invalid_sequences')} | {cell('boundary_errors')} | "
                  f"{cell('type_errors')} | {cell('spurious_entities')} | {cell('predicted_entities')} |")
        for name, key in (("CRF - softmax", "f1_gap"), ("constrained - softmax", "f1_gap_constraints"),
                          ("CRF - constrained softmax", "f1_gap_over_constrained")):
            gap = r["summary"][key]
            print(f"| {r['task']} ({r['init']}) | {name} | {gap['mean']:+.3f} ± {gap['sd']:.3f} (per-seed gaps) | | | | | |")


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)  # --json: merged into an existing file
    parser.add_argument("--init", help="the encoder of every task (default: course-zh for ner-zh, course-en for ner-en)")
    parser.add_argument("--tasks", default="ner-zh,ner-en")
    args = parser.parse_args()
    set_threads(args.threads)  # this process runs the fine-tuning and decodes the softmax runs again
    record = {}
    for task in args.tasks.split(","):
        if task not in TASKS:
            raise SystemExit(f"unknown task {task!r}: this study has recipes for {', '.join(TASKS)}")
        init = args.init or TASKS[task][0]
        entry = {"task": task, "init": init, "seeds": [int(s) for s in args.seeds.split(",")], "commands": {}}
        for head in HEADS:
            entry[head] = []
            for seed in args.seeds.split(","):
                command, numbers = run_one(task, init, head, seed, args)
                entry["commands"][head] = command
                entry[head].append(numbers)
        entry["softmax_constrained"] = [
            constrained_decoding(run_dir(args.out, task, init, "softmax", seed)) for seed in args.seeds.split(",")]
        entry["summary"] = {row: {k: summary([x[k] for x in entry[row]]) for k in (*SCORES, *COUNTS)} for row in ROWS}
        gap = lambda a, b: summary([x["f1"] - y["f1"] for x, y in zip(entry[a], entry[b])])  # noqa: E731, per seed
        entry["summary"]["f1_gap"] = gap("crf", "softmax")
        entry["summary"]["f1_gap_constraints"] = gap("softmax_constrained", "softmax")  # what the constraints buy
        entry["summary"]["f1_gap_over_constrained"] = gap("crf", "softmax_constrained")  # what the transitions add
        record[f"{init}/{task}"] = entry
    print_table(record)
    if args.json:
        write_record(Path(args.json), args, record)


def write_record(path: Path, args, record: dict) -> None:
    """Merge this run's entries into the JSON record at `path`: {"INIT/TASK": {...}}."""
    merged = json.loads(path.read_text()) if path.exists() else {}
    for key, entry in record.items():
        merged[key] = {
            **entry, "metric": "test entity F1; test error counts (bertedu.training.metrics.tagging_errors)",
            "threads": args.threads,
            "command": f"python benchmarks/crf_gap.py --tasks {entry['task']} --seeds {args.seeds} --threads "
                       f"{args.threads} --out {args.out} --json {path}" + (f" --init {args.init}" if args.init else "")
                       + (f" --extra '{args.extra}'" if args.extra else ""),
            "machine": machine(),
        }
    path.write_text(json.dumps(merged, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
