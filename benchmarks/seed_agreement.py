"""Do the seeds differ? (issue 57): notebook 08's fine-tune from MiniLM at several seeds, and which test
examples each seed answers right. Three seeds of that recipe scored the same test accuracy (0.877 in
bertedu/weights/finetune_gap.json); this record shows whether the seeds made the same model or different
models with the same count.

Each run is one `bertedu finetune` command (printed; a run whose results.json exists is read, not repeated):

    python benchmarks/seed_agreement.py --seeds 0,1,2 --threads 1 --out runs/seed-agreement \\
        --json bertedu/weights/seed_agreement.json

The record ({"minilm/topic-en": {...}}) holds the test example ids, each seed's predictions and test accuracy,
the exact command and the machine. Notebook 08 reads it.
"""

from __future__ import annotations

import json
from pathlib import Path

from finetune_runs import machine, run_finetune, set_threads, shown_command, study_parser, task_score

TASK, INIT = "topic-en", "minilm"
# notebook 08's CPU recipe, as benchmarks/finetune_gap.py ran it for bertedu/weights/finetune_gap.json
FLAGS = "--max-train 600 --max-eval 300 --epochs 2 --batch-size 32 --lr 1e-4 --max-seq-length 32 --dropout 0"


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)
    args = parser.parse_args()
    set_threads(args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    entry = {"task": TASK, "init": INIT, "seeds": seeds, "test_accuracy": [], "predictions": [],
             "finetune": f"bertedu finetune --task {TASK} --init {INIT} {FLAGS} --seed SEED",
             "command": shown_command(Path(__file__).name), "threads": args.threads, "machine": machine()}
    for seed in seeds:
        run = Path(args.out) / f"{TASK}-seed{seed}"
        results = run_finetune(TASK, INIT, FLAGS.split(), str(seed), run, args.extra)
        rows = [json.loads(line) for line in (run / "predictions_test.jsonl").read_text().splitlines() if line.strip()]
        ids = [r["id"] for r in rows]
        assert entry.setdefault("ids", ids) == ids, "every seed is scored on the same test examples"
        entry.setdefault("gold", [r["gold"] for r in rows])
        entry["predictions"].append([r["prediction"] for r in rows])
        entry["test_accuracy"].append(task_score(results))
        print(f"seed {seed}: test accuracy {task_score(results):.3f}", flush=True)
    if args.json:
        path = Path(args.json)
        record = json.loads(path.read_text()) if path.exists() else {}
        record[f"{INIT}/{TASK}"] = entry
        path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
