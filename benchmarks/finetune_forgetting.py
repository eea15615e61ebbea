"""What a fine-tuning learning rate does to the task and to what pretraining learnt
(issue 38 item 2, the learning-rate part): fine-tune `minilm-mlm` (the real MiniLM encoder
with the course's masked-LM head) on an embedded task at several peak learning rates and
seeds, then measure

- the task: the run's test score (`results.json`), and
- the forgetting: the fine-tuned encoder put back under minilm-mlm's own MLM head, its
  held-out masked-token accuracy (`bertedu.training.heldout.masked_accuracy`, wiki-en's
  held-out documents, the first `--sequences` of them, seed 0), against the same measure of
  the shipped minilm-mlm before fine-tuning.

The MLM head is not fine-tuned (a classification run has no use for it), so a drop in masked
accuracy is the encoder's: its representations no longer fit what the head learnt to read.
Each run is one `bertedu finetune` command (printed); a run whose results.json exists is
read, not repeated.

    python benchmarks/finetune_forgetting.py --task topic-en --lrs 2e-5,1e-4,5e-4,2e-3 --seeds 0,1,2 \\
        --out runs/forgetting-topic-en --json bertedu/weights/finetune_forgetting.json
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import platform
import statistics
import subprocess
import sys
from pathlib import Path

# the task's CPU-sized recipe (benchmarks/finetune_gap.py's, less the learning rate)
RECIPES = {
    "topic-en": "--max-train 600 --max-eval 300 --epochs 3 --batch-size 32 --max-seq-length 32",
    "paraphrase-en": "--max-train 192 --max-eval 128 --epochs 1 --batch-size 16 --max-seq-length 64",
}


@functools.cache
def _minilm_mlm():
    """minilm-mlm, its tokenizer and its encoder's shipped weights: loaded once, reused for every run."""
    from bertedu.pretrained import load_masked_lm

    model, tokenizer = load_masked_lm("minilm-mlm")
    return model, tokenizer, {k: v.clone() for k, v in model.bert.state_dict().items()}


def masked_accuracy_of(run: Path | None, sequences: int) -> float:
    """Held-out masked-token accuracy of minilm-mlm's MLM head on top of `run`'s fine-tuned
    encoder (None: minilm-mlm as shipped)."""
    from bertedu.training.finetune import load_finetuned
    from bertedu.training.heldout import masked_accuracy

    model, tokenizer, shipped = _minilm_mlm()
    model.bert.load_state_dict(shipped)
    if run is not None:
        tuned = load_finetuned(run)[0].bert.state_dict()
        encoder = {k: v for k, v in tuned.items() if not k.startswith("pooler.")}
        missing, unexpected = model.bert.load_state_dict(encoder, strict=False)
        assert not unexpected and all(k.startswith("pooler.") for k in missing), (missing, unexpected)
    return masked_accuracy(model, tokenizer, seed=0, max_sequences=sequences)["accuracy"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", default="topic-en", choices=sorted(RECIPES))
    parser.add_argument("--lrs", default="2e-5,1e-4,5e-4,2e-3")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sequences", type=int, default=128, help="held-out sequences for the masked accuracy")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--extra", default="", help="flags added to every command (later flags win), e.g. for a smoke test")
    parser.add_argument("--out", required=True)
    parser.add_argument("--json", help="also write the numbers, the commands and the machine here")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    torch.set_num_threads(args.threads)
    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    rows = {}
    for lr in args.lrs.split(","):
        rows[lr] = {"task": [], "masked_accuracy": []}
        for seed in args.seeds.split(","):
            out = Path(args.out) / f"lr{lr}-seed{seed}"
            command = ["bertedu", "finetune", "--task", args.task, "--init", "minilm-mlm", *RECIPES[args.task].split(),
                       "--lr", lr, *args.extra.split(), "--seed", seed, "--no-progress", "--out", str(out)]
            if not (out / "results.json").exists():
                print(" ".join(command), flush=True)
                subprocess.run([sys.executable, "-m", "bertedu.cli", *command[1:]], env=env, check=True,
                               capture_output=True)
            results = json.loads((out / "results.json").read_text())
            rows[lr]["task"].append(results["test"][results["main_metric"]])
            rows[lr]["masked_accuracy"].append(masked_accuracy_of(out, args.sequences))
    before = masked_accuracy_of(None, args.sequences)
    print(f"\n{args.task}, init minilm-mlm; held-out masked-token accuracy before fine-tuning {before:.3f} "
          f"({args.sequences} sequences)\n\n| peak lr | test score | masked-token accuracy after |\n|--:|--:|--:|")
    fmt = lambda v: f"{statistics.mean(v):.3f} ± {statistics.stdev(v) if len(v) > 1 else 0:.3f} ({', '.join(f'{x:.3f}' for x in v)})"  # noqa: E731
    for lr, r in rows.items():
        print(f"| {lr} | {fmt(r['task'])} | {fmt(r['masked_accuracy'])} |")
    if args.json:
        record = {"task": args.task, "init": "minilm-mlm", "seeds": [int(s) for s in args.seeds.split(",")],
                  "sequences": args.sequences, "masked_accuracy_before": before, "by_lr": rows,
                  "command": " ".join(sys.argv).replace(sys.argv[0], f"python benchmarks/{Path(__file__).name}"),
                  "finetune": f"bertedu finetune --task {args.task} --init minilm-mlm {RECIPES[args.task]} --lr LR --seed SEED",
                  "machine": f"{platform.machine()}, torch {torch.__version__}, "
                             f"CPU capability {torch.backends.cpu.get_cpu_capability()}"}
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
