"""How short can notebook 11's CPU fine-tune be? Fine-tune MiniLM on qa-cloze-en with the
notebook's CPU settings, changing only the number of training questions, the batch size,
the learning rate, the dropout and the frozen layers, and print what each run scores and how
long it takes.

Each configuration is `max_train:batch_size:lr[:dropout[:freeze_layers]]` (no dropout field: the
encoder's own 0.1; no freeze field: nothing frozen); everything else is notebook 11's `"cpu"`
setting (windows of 128 tokens, stride 64, one epoch, 64 dev and 64 test questions, fp32).
Notebook 11 itself runs 448:16:5e-4:0:2. The runs go one after the other, in this process,
with the notebook's seed; time them on an otherwise idle machine.

    python benchmarks/qa_recipe.py --configs 512:16:5e-4,384:16:5e-4,256:16:5e-4
    python benchmarks/qa_recipe.py --configs 512:16:5e-4:0.1,512:16:5e-4:0
    python benchmarks/qa_recipe.py --configs 448:16:5e-4:0:0,448:16:5e-4:0:2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

NOTEBOOK_11_CPU = dict(task="qa-cloze-en", max_eval=64, max_seq_length=128, doc_stride=64, max_query_length=64,
                       max_answer_length=30, epochs=1, log_every=1)


def run(max_train: int, batch_size: int, lr: float, init: str, dropout: float | None = None,
        freeze_layers: int = 0) -> dict:
    from bertedu.training.finetune import FinetuneConfig, finetune
    from bertedu.utils import seed_everything

    seed_everything(0)
    extra = {"preset": "minilm"} if init == "random" else {}
    with tempfile.TemporaryDirectory() as folder:  # checkpoints with optimiser state: hundreds of MB
        start = time.perf_counter()
        result = finetune(FinetuneConfig(**NOTEBOOK_11_CPU, max_train=max_train, batch_size=batch_size, lr=lr,
                                         init=init, dropout=dropout, freeze_layers=freeze_layers, progress=False,
                                         out=f"{folder}/qa", **extra))
        seconds = time.perf_counter() - start
    return {"max_train": max_train, "batch_size": batch_size, "lr": lr, "dropout": dropout,
            "freeze_layers": freeze_layers, "init": init,
            "windows": result["train_features"], "steps": result["steps"], "seconds": round(seconds, 1),
            "dev": result["dev"], "test": result["test"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--configs", default="512:16:5e-4,384:16:5e-4,256:16:5e-4",
                        help="comma-separated max_train:batch_size:lr[:dropout[:freeze_layers]]")
    parser.add_argument("--init", default="minilm", help="minilm, random, or anything --init takes")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    rows = []
    print("| questions | batch | lr | dropout | frozen layers | windows | steps | dev EM / F1 | test EM / F1 "
          "| seconds |")
    print("|--:|--:|--:|--:|--:|--:|--:|--:|--:|--:|")
    for config in args.configs.split(","):
        max_train, batch_size, lr, *rest = config.split(":")
        dropout = float(rest[0]) if rest else None
        row = run(int(max_train), int(batch_size), float(lr), args.init, dropout, int(rest[1]) if len(rest) > 1 else 0)
        rows.append(row)
        dev, test = row["dev"], row["test"]
        shown = "0.1 (own)" if row["dropout"] is None else f"{row['dropout']:g}"
        print(f"| {row['max_train']} | {row['batch_size']} | {row['lr']:g} | {shown} | {row['freeze_layers']} | "
              f"{row['windows']} | {row['steps']} | "
              f"{dev['exact_match']:.1f} / {dev['f1']:.1f} | {test['exact_match']:.1f} / {test['f1']:.1f} | "
              f"{row['seconds']:.0f} |", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
