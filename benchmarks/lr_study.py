"""Learning rate or budget? (issue 50 item 1): the CPU recipe's high learning rate at its own few
steps, beside the paper's rate (5e-5, Devlin et al. 2019 A.3 and section 4.2) at the same steps and
at the paper's rate given the epochs it needs, three seeds each, dev scored after every epoch.

Each task fine-tunes the model its notebook uses, with that notebook's CPU recipe less the learning
rate and the epochs (`TASKS`). Arms (a run = one `bertedu finetune` command, printed; a run whose
results.json exists is read, not repeated):

    high           the notebook's rate, the notebook's epochs
    paper          5e-5, the notebook's epochs (the same steps)
    paper-long     5e-5, `long` epochs: the dev curve shows whether it has converged
    nosegment-paper-long   (paraphrase-en only, issue 50 item 3) paper-long with --no-segment-ids: every
                           token in segment 0, so only [SEP] marks where A ends

    python benchmarks/lr_study.py --tasks paraphrase-en,topic-en --seeds 0,1,2 --threads 1 \\
        --out runs/lr-study --json bertedu/weights/lr_study.json

The record ({task: {...}}, merged into --json) holds each arm's flags, per-seed test scores, per-seed
dev curves (step, dev score), the steps, the exact commands and the machine. Notebooks 08, 10 and
11 read it.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from finetune_runs import machine, mean_sd, run_finetune, set_threads, shown_command, study_parser, task_score

PAPER_LR = "5e-5"
# task -> its notebook's model and CPU recipe (less --lr and --epochs), its high rate and epochs, and the epochs
# given to the paper's rate
TASKS = {
    "paraphrase-en": dict(init="minilm", high="3e-4", epochs="1", long="6", notebook="10",
                          recipe="--max-train 192 --max-eval 128 --batch-size 16 --max-seq-length 64"),
    "topic-en": dict(init="minilm-mlm", high="5e-4", epochs="3", long="10", notebook="08 section 9",
                     recipe="--max-train 600 --max-eval 300 --batch-size 32 --max-seq-length 32"),
    "qa-cloze-en": dict(init="minilm", high="5e-4", epochs="1", long="3", notebook="11",
                        recipe="--max-train 448 --max-eval 64 --batch-size 16 --max-seq-length 128 --doc-stride 64 "
                               "--max-query-length 64 --max-answer-length 30 --dropout 0 --freeze-layers 2"),
}


def arms(task: str) -> dict[str, str]:
    """arm name -> the flags it adds to the task's recipe."""
    t = TASKS[task]
    out = {"high": f"--lr {t['high']} --epochs {t['epochs']}",
           "paper": f"--lr {PAPER_LR} --epochs {t['epochs']}",
           "paper-long": f"--lr {PAPER_LR} --epochs {t['long']}"}
    if task == "paraphrase-en":
        out["nosegment-paper-long"] = out["paper-long"] + " --no-segment-ids"
    return out


def dev_curve(run: Path, metric: str) -> list[list[float]]:
    """[[step, dev score], ...] from the run's metrics.jsonl (one evaluation per epoch)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [[r["step"], r[f"eval_{metric}"]] for r in rows if f"eval_{metric}" in r]


def save(path: Path, task: str, entry: dict) -> None:
    """Merge `entry` into the record at `path` ({task: entry}): after every arm, so a long study leaves
    its finished arms behind."""
    record = json.loads(path.read_text()) if path.exists() else {}
    record[task] = entry
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def study(task: str, seeds: list[str], out: Path, extra: str, args) -> dict:
    t = TASKS[task]
    entry = {"task": task, "init": t["init"], "notebook": t["notebook"], "paper_lr": float(PAPER_LR),
             "seeds": [int(s) for s in seeds], "recipe": t["recipe"], "arms": {},
             "command": shown_command(Path(__file__).name), "threads": args.threads, "machine": machine()}
    for name, flags in arms(task).items():
        row = {"flags": flags, "test": [], "dev_curves": [], "steps": None,
               "finetune": f"bertedu finetune --task {task} --init {t['init']} {t['recipe']} {flags} --seed SEED"}
        for seed in seeds:
            run = out / task / f"{name}-seed{seed}"
            results = run_finetune(task, t["init"], [*t["recipe"].split(), *flags.split()], seed, run, extra)
            row["test"].append(task_score(results))
            row["dev_curves"].append(dev_curve(run, results["main_metric"]))
            row["steps"], entry["metric"] = results["steps"], f"test {results['main_metric']}"
        entry["arms"][name] = row
        print(f"{task} {name:22s} {row['steps']:>4} steps  {mean_sd(row['test'])}", flush=True)
        if args.json:
            save(Path(args.json), task, entry)
    return entry


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--tasks", default="paraphrase-en,topic-en")
    args = parser.parse_args()
    set_threads(args.threads)
    for task in args.tasks.split(","):
        entry = study(task, args.seeds.split(","), Path(args.out), args.extra, args)
        for name, row in entry["arms"].items():
            print(f"  {name}: {statistics.mean(row['test']):.3f}")


if __name__ == "__main__":
    main()
