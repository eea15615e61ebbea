"""Notebook 11's random twin at a setting of its own (issue 57 item 2): every layer trainable, trained until its
training loss stops falling.

The lesson's twin (`bertedu/weights/finetune_gap.json`, "minilm/qa-cloze-en") is fine-tuned with the lesson's
cheap recipe: 67 steps at 5e-4 with its embeddings and lowest two layers frozen, so they stay random. This gives the
twin (`--init random --preset minilm`, MiniLM's shape and vocabulary) every layer and six epochs (402 steps) at the
same rate, three seeds, and records each seed's test F1 and exact match, its dev F1 after every epoch and its
training-loss curve (to show where it stops falling):

    OMP_NUM_THREADS=2 python benchmarks/qa_twin.py --seeds 0,1,2 --threads 2 --out runs/qa-twin-own \\
        --json bertedu/weights/qa_twin.json

A run whose results.json exists is read, not repeated. Notebook 11 reads the record.
"""

from __future__ import annotations

import json
from pathlib import Path

from finetune_runs import machine, run_finetune, set_threads, shown_command, study_parser
from lr_study import dev_curve, train_loss_curve

TASK = "qa-cloze-en"
RECIPE = ("--max-train 448 --max-eval 64 --epochs 6 --batch-size 16 --lr 5e-4 --max-seq-length 128 --doc-stride 64 "
          "--max-query-length 64 --max-answer-length 30 --dropout 0")


def main() -> None:
    args = study_parser(__doc__.split("\n")[0]).parse_args()
    set_threads(args.threads)
    from bertedu.pretrained import minilm_vocab_path

    flags = ["--preset", "minilm", "--vocab", str(minilm_vocab_path()), *RECIPE.split()]
    entry = {"task": TASK, "init": "random", "recipe": RECIPE, "command": shown_command("qa_twin.py"),
             "machine": machine(), "seeds": [], "test_f1": [], "test_exact_match": [], "dev_f1_curves": [],
             "train_loss_curves": [], "steps": None,
             "run_command": f"bertedu finetune --task {TASK} --init random --preset minilm --vocab MINILM_VOCAB "
                            f"{RECIPE} --seed SEED"}
    for seed in args.seeds.split(","):
        run = Path(args.out) / f"seed{seed}"
        results = run_finetune(TASK, "random", flags, seed, run, args.extra)
        entry["seeds"].append(int(seed))
        entry["test_f1"].append(results["test"]["f1"])
        entry["test_exact_match"].append(results["test"]["exact_match"])
        entry["dev_f1_curves"].append(dev_curve(run, "f1"))
        entry["train_loss_curves"].append(train_loss_curve(run))
        entry["steps"] = results["steps"]
        print(f"seed {seed}: test F1 {results['test']['f1']:.1f}, exact match {results['test']['exact_match']:.1f}")
    if args.json:
        Path(args.json).write_text(json.dumps(entry, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
