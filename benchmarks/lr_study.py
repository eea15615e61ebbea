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
    high-long      (paraphrase-en only, issue 57) the notebook's rate for `long` epochs: both rates at both lengths
    random-paper-long, random-high-long, random-high-xlong
                   (paraphrase-en only, issue 57) the random-weights twin (--init random --preset minilm, MiniLM's
                   vocabulary), every layer trainable, at both rates for `long` epochs and at the high rate for
                   `xlong` epochs; the record keeps each run's training-loss curve, to show where it stops falling

`--arms high-long,...` runs only the arms named and merges them into the task's existing record entry (each
arm keeps the command that made it):

    python benchmarks/lr_study.py --tasks paraphrase-en --arms high-long --seeds 0,1,2 --threads 1 \\
        --out runs/lr-study --json bertedu/weights/lr_study.json

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
    "paraphrase-en": dict(init="minilm", high="3e-4", epochs="1", long="6", xlong="24", notebook="10",
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
        out["high-long"] = f"--lr {t['high']} --epochs {t['long']}"
        for name in ("paper-long", "high-long"):
            out[f"random-{name}"] = out[name]
        out["random-high-xlong"] = f"--lr {t['high']} --epochs {t['xlong']}"
    return out


def arm_init(task: str, name: str) -> tuple[str, list[str], str]:
    """(init, the flags it adds, how a record shows them) of arm `name`: the random-weights twin of the
    task's model for the random-* arms (MiniLM's shape and vocabulary), else the task's model."""
    if not name.startswith("random-"):
        return TASKS[task]["init"], [], ""
    from bertedu.pretrained import minilm_vocab_path

    assert TASKS[task]["init"] == "minilm", "a random twin is defined here for MiniLM only"
    return "random", ["--preset", "minilm", "--vocab", str(minilm_vocab_path())], " --preset minilm --vocab MINILM_VOCAB"


def train_loss_curve(run: Path) -> list[list[float]]:
    """[[step, training loss], ...] from the run's metrics.jsonl."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [[r["step"], r["loss"]] for r in rows if "loss" in r]


def dev_curve(run: Path, metric: str) -> list[list[float]]:
    """[[step, dev score], ...] from the run's metrics.jsonl (one evaluation per epoch)."""
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [[r["step"], r[f"eval_{metric}"]] for r in rows if f"eval_{metric}" in r]


def save(path: Path, task: str, entry: dict) -> None:
    """Merge `entry` into the record at `path` ({task: entry}, its arms added to those there): after every
    arm, so a long study leaves its finished arms behind."""
    record = json.loads(path.read_text()) if path.exists() else {}
    arms_before = record.get(task, {}).get("arms", {})  # arms another process wrote meanwhile are kept
    record[task] = {**entry, "arms": {**arms_before, **entry["arms"]}}
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def study(task: str, seeds: list[str], out: Path, extra: str, args) -> dict:
    t = TASKS[task]
    entry = {"task": task, "init": t["init"], "notebook": t["notebook"], "paper_lr": float(PAPER_LR),
             "seeds": [int(s) for s in seeds], "recipe": t["recipe"], "arms": {},
             "command": shown_command(Path(__file__).name), "threads": args.threads, "machine": machine()}
    chosen = arms(task)
    if args.arms:  # only these arms, merged into the task's existing entry
        chosen = {name: chosen[name] for name in args.arms.split(",")}
        if args.json and Path(args.json).exists():
            entry = json.loads(Path(args.json).read_text()).get(task, entry)
    for name, flags in chosen.items():
        init, init_flags, shown = arm_init(task, name)
        row = {"flags": flags, "test": [], "dev_curves": [], "train_loss_curves": [], "steps": None,
               "finetune": f"bertedu finetune --task {task} --init {init}{shown} {t['recipe']} {flags} --seed SEED",
               "command": shown_command(Path(__file__).name), "seeds": [int(s) for s in seeds],
               "threads": args.threads, "machine": machine()}
        for seed in seeds:
            run = out / task / f"{name}-seed{seed}"
            results = run_finetune(task, init, [*init_flags, *t["recipe"].split(), *flags.split()], seed, run, extra)
            row["test"].append(task_score(results))
            row["dev_curves"].append(dev_curve(run, results["main_metric"]))
            row["train_loss_curves"].append(train_loss_curve(run))
            row["steps"], entry["metric"] = results["steps"], f"test {results['main_metric']}"
        entry["arms"][name] = row
        print(f"{task} {name:22s} {row['steps']:>4} steps  {mean_sd(row['test'])}", flush=True)
        if args.json:
            save(Path(args.json), task, entry)
    return entry


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--tasks", default="paraphrase-en,topic-en")
    parser.add_argument("--arms", default="", help="run only these arms (comma-separated) and merge them into the "
                                                   "task's existing record entry")
    args = parser.parse_args()
    set_threads(args.threads)
    for task in args.tasks.split(","):
        entry = study(task, args.seeds.split(","), Path(args.out), args.extra, args)
        for name, row in entry["arms"].items():
            print(f"  {name}: {statistics.mean(row['test']):.3f}")


if __name__ == "__main__":
    main()
