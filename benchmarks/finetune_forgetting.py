"""What a fine-tuning learning rate does to the task and to what pretraining learnt
(issue 38 item 2, the learning-rate part): fine-tune a shipped masked LM on an embedded task at
several peak learning rates and seeds, then measure

- the task: the run's test score (`results.json`), and
- the forgetting: the fine-tuned encoder put back under the masked LM's own MLM head, its
  held-out masked-token accuracy (`bertedu.training.heldout.masked_accuracy`, the first
  `--sequences` 128-piece runs, masks of seed 0), against the same measure of the shipped
  model before fine-tuning. The held-out text: wiki-en's held-out documents for `minilm-mlm`;
  for a course model (`course-zh`), the documents its own pretraining run held out
  (benchmarks/course_lengths.py's `held_out_documents`: People's Daily articles it never saw).

Each task fine-tunes the masked LM that reads its language by default (topic-en from
minilm-mlm, ner-zh from course-zh; `--init` replaces it). The MLM head is not fine-tuned (a
task run has no use for it), so a drop in masked accuracy is the encoder's: its
representations no longer fit what the head learnt to read. Each run is one `bertedu
finetune` command (printed); a run whose results.json exists is read, not repeated.

    python benchmarks/finetune_forgetting.py --task topic-en --lrs 2e-5,1e-4,5e-4,2e-3 --seeds 0,1,2 \\
        --out runs/forgetting-topic-en --json bertedu/weights/finetune_forgetting.json
    python benchmarks/finetune_forgetting.py --task ner-zh --lrs 5e-5,2e-4,1e-3,2e-3,5e-3 --seeds 0,1,2 --threads 1 \\
        --out runs/forgetting-ner-zh --json bertedu/weights/finetune_forgetting_ner_zh.json
"""

from __future__ import annotations

from pathlib import Path

from finetune_runs import (INITS, RECIPES, machine, masked_accuracy_of, mean_sd, run_finetune, set_threads,
                           shown_command, study_parser, task_score)


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="topic-en", choices=sorted(RECIPES))
    parser.add_argument("--init", help="the shipped masked LM to fine-tune (None: the task's own, "
                                       + ", ".join(f"{t}: {i}" for t, i in INITS.items()) + ")")
    parser.add_argument("--lrs", default="2e-5,1e-4,5e-4,2e-3")
    parser.add_argument("--sequences", type=int, default=128, help="held-out sequences for the masked accuracy")
    args = parser.parse_args()
    set_threads(args.threads)
    init = args.init or INITS[args.task]
    rows = {}
    for lr in args.lrs.split(","):
        rows[lr] = {"task": [], "masked_accuracy": []}
        for seed in args.seeds.split(","):
            out = Path(args.out) / f"lr{lr}-seed{seed}"
            results = run_finetune(args.task, init, [*RECIPES[args.task].split(), "--lr", lr], seed, out, args.extra)
            rows[lr]["task"].append(task_score(results))
            rows[lr]["masked_accuracy"].append(masked_accuracy_of(init, out, args.sequences))
    before = masked_accuracy_of(init, None, args.sequences)
    print(f"\n{args.task}, init {init}; held-out masked-token accuracy before fine-tuning {before:.3f} "
          f"({args.sequences} sequences)\n\n| peak lr | test score | masked-token accuracy after |\n|--:|--:|--:|")
    for lr, r in rows.items():
        print(f"| {lr} | {mean_sd(r['task'])} | {mean_sd(r['masked_accuracy'])} |")
    if args.json:
        import json

        record = {"task": args.task, "init": init, "seeds": [int(s) for s in args.seeds.split(",")],
                  "sequences": args.sequences, "masked_accuracy_before": before, "by_lr": rows,
                  "command": shown_command(Path(__file__).name),
                  "finetune": f"bertedu finetune --task {args.task} --init {init} {RECIPES[args.task]} --lr LR --seed SEED",
                  "machine": machine()}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
