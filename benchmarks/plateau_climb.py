"""The climb past the unigram plateau, recorded for notebook 06 (issue 50).

One `tiny` run from random weights on wiki-en (64 tokens, batch 32, masked LM only, lr 1e-3,
6% warm-up then linear decay), long enough to leave the plateau; a checkpoint every
--eval-every steps. Each checkpoint is then scored on the run's held-out sequences (one fixed
mask each), split by what the input shows at a selected position:

    [MASK]      only the context tells the word: accuracy, and the MLM loss there against the
                loss of answering with the training text's piece frequencies (add-one counts),
                as a paired per-position difference with its standard error
    unchanged   the word is in plain view (10% of the selected pieces): accuracy

and each checkpoint fills notebook 06's probe sentences (top 5).

    OMP_NUM_THREADS=1 python benchmarks/plateau_climb.py --steps 10000 --eval-every 500 --seed 0 --threads 1 \
        --out runs/plateau-climb --json bertedu/weights/plateau_climb.json

A run folder that already holds the last checkpoint is measured, not retrained. --stop-at N stops
the run after step N although its schedule (warm-up, linear decay) stays the --steps run's
(`bertedu.training.loop.train`'s stop_at_step), and measures the checkpoints up to N.

The vocabulary is course-en's shipped 8,000-piece WordPiece vocabulary (fixed, so the run repeats).
Writes OUT/ (the run) and the JSON record: command, seed, settings, per-step numbers, CPU seconds.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import resource
import sys
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

from bertedu.data import collate_pretraining  # noqa: E402
from bertedu.data.corpora import load_corpus  # noqa: E402
from bertedu.training.checkpoint import load_weights  # noqa: E402
from bertedu.training.pretrain import (PretrainConfig, corpus_documents, fill_mask, heldout_dataset,  # noqa: E402
                                       load_pretrained, pretrain, split_documents)

PROBES = [  # notebook 06's probe sentences
    "it is one [MASK] the largest cities in the world .",
    "[MASK] city is the capital of the country .",
    "he was born in 1950 [MASK] died in 2010 .",
    "the war ended [MASK] 1945 .",
]


def run_settings(args) -> PretrainConfig:
    return PretrainConfig(
        preset="tiny", corpus="wiki-en", vocab=str(ROOT / "bertedu/weights/course-en/vocab.txt"),
        max_seq_length=64, nsp=False, precision="bf16", batch_size=32, lr=1e-3, warmup_ratio=0.06,
        steps=args.steps, eval_every=args.eval_every, save_every=args.eval_every,
        keep_checkpoints=args.steps // args.eval_every + 1, max_eval_examples=args.eval_sequences,
        log_every=50, progress=False, seed=args.seed, device="cpu", out=args.out)


def unigram_log_probs(cfg: PretrainConfig, tokenizer) -> torch.Tensor:
    """(V,) log frequency of each piece in the training documents, add-one counts."""
    train_docs, _ = split_documents(corpus_documents(cfg, load_corpus(cfg.corpus)), cfg.eval_documents, cfg.seed)
    counts = Counter(i for doc in train_docs for sentence in doc for i in tokenizer.encode(sentence).input_ids[1:-1])
    freq = torch.ones(len(tokenizer))
    for i, c in counts.items():
        freq[i] += c
    return (freq / freq.sum()).log()


@torch.no_grad()
def score(model, batch: dict, kinds: dict, unigram: torch.Tensor) -> dict:
    """Accuracy at each kind of selected position; loss at [MASK] against the frequencies'."""
    model.eval()
    logits = model(**{k: batch[k] for k in ("input_ids", "token_type_ids", "attention_mask")}).mlm_logits
    labels = batch["labels"]
    out = {f"accuracy_{k}": (logits[w].argmax(-1) == labels[w]).float().mean().item() for k, w in kinds.items()}
    hidden = labels[kinds["mask"]]  # (M,)
    model_loss = F.cross_entropy(logits[kinds["mask"]].float(), hidden, reduction="none")  # (M,)
    diff = model_loss + unigram[hidden]  # model loss - unigram loss, per position
    out.update(loss_mask=model_loss.mean().item(), loss_mask_minus_unigram=diff.mean().item(),
               loss_mask_minus_unigram_se=(diff.std() / math.sqrt(len(diff))).item())
    return out


def measure(cfg: PretrainConfig, args) -> dict:
    model, tokenizer = load_pretrained(cfg.out)
    held_out = heldout_dataset(cfg, tokenizer)
    batch = collate_pretraining([held_out[i] for i in range(len(held_out))], pad_token_id=tokenizer.pad_token_id)
    selected = batch["labels"] != -100
    kinds = {"mask": selected & (batch["input_ids"] == tokenizer.mask_token_id),
             "unchanged": selected & (batch["input_ids"] == batch["labels"])}
    unigram = unigram_log_probs(cfg, tokenizer)
    hidden = batch["labels"][kinds["mask"]]
    rows = []
    for step in range(args.eval_every, (args.stop_at or args.steps) + 1, args.eval_every):
        load_weights(Path(cfg.out) / f"checkpoint-{step}", model)
        row = {"step": step, **score(model, batch, kinds, unigram)}
        row["probes"] = {t: [w for w, _ in fill_mask(model, tokenizer, t, top_k=5)[0]] for t in PROBES}
        rows.append(row)
        print(json.dumps({k: v for k, v in row.items() if k != "probes"}), flush=True)
    most = int(torch.bincount(hidden).argmax())
    return {"held_out": {"sequences": len(held_out), "mask_positions": int(kinds["mask"].sum()),
                         "unchanged_positions": int(kinds["unchanged"].sum())},
            "baselines_at_mask": {"unigram_loss": -unigram[hidden].mean().item(),
                                  "always_most_frequent_piece": tokenizer.convert_ids_to_tokens(most),
                                  "always_most_frequent_accuracy": (hidden == most).float().mean().item()},
            "steps": rows}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=10_000)
    parser.add_argument("--stop-at", type=int, default=None, help="stop after this step; the schedule is --steps'")
    parser.add_argument("--eval-every", type=int, default=500)
    parser.add_argument("--eval-sequences", type=int, default=512)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/plateau-climb")
    parser.add_argument("--json", default="bertedu/weights/plateau_climb.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = run_settings(args)
    start = time.time()
    if not (Path(cfg.out) / f"checkpoint-{args.stop_at or args.steps}").exists():
        pretrain(cfg, stop_at_step=args.stop_at)
    record = {"command": "OMP_NUM_THREADS=1 python benchmarks/plateau_climb.py " + " ".join(sys.argv[1:]),
              "seed": args.seed, "settings": {k: v for k, v in dataclasses.asdict(cfg).items() if k != "out"},
              **measure(cfg, args)}
    usage = resource.getrusage(resource.RUSAGE_SELF)
    record["cpu_seconds"] = round(usage.ru_utime + usage.ru_stime)
    record["wall_seconds"] = round(time.time() - start)
    record["settings"]["vocab"] = "bertedu/weights/course-en/vocab.txt"
    Path(args.json).write_text(json.dumps(record, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
    print(f"wrote {args.json}")


if __name__ == "__main__":
    main()
