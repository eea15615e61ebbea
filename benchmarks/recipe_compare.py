"""The budget recipe against BERT's recipe at equal training FLOPs, on the CPU (issue 52 item 2).

Both arms pretrain `mini` on wiki-en from one shared vocabulary, one process at a time:

    bert     BERT's recipe as `bertedu pretrain` runs it by default: sentence pairs, NSP on,
             15% of the pieces selected, batch 16, lr 5e-4
    budget   the route's recipe (bertedu.training.pretrain.BUDGET_RECIPE): packed 128-token
             document blocks, no NSP, 30% selected (MosaicBERT), the decoder bias started at
             the log unigram frequencies, a doubled learning rate (1e-3)

Equal compute: each arm gets the real tokens that buy the same training FLOPs
(`train_flops_per_token`: 3 forwards of the dense layers, attention at 128 and the sparse
MLM head on the selected share), the schedule spread over them by --max-tokens. Each run is
then measured by `bertedu masked-accuracy` (wiki-en's held-out documents, 15% masked, masks
seeded 0: the same sequences and masks for both arms, since they share the vocabulary).
Seeds pair the arms; `bertedu.course.stats.compare` gives the paired difference.

    python benchmarks/recipe_compare.py --flops 1.5e12 --seeds 0,1,2 --threads 1 --eval-sequences 128 \
        --out runs/recipe-compare

Writes OUT/<arm>-s<seed>/ and bertedu/weights/recipe_compare.json (command, seeds, per-seed
results, the comparison, CPU seconds).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bertedu.course.stats import compare  # noqa: E402
from bertedu.course.flops import forward_flops  # noqa: E402
from bertedu.model.config import BertConfig  # noqa: E402
from bertedu.training.pretrain import BUDGET_RECIPE  # noqa: E402

SEQ = 128
ARMS = {  # arm -> (mlm probability, flags beyond the common command)
    "bert": (0.15, ["--lr", "5e-4"]),
    "budget": (BUDGET_RECIPE["mlm_probability"], [*BUDGET_RECIPE["flags"], "--lr", "1e-3"]),
}


def train_flops_per_token(config: BertConfig, seq_len: int, mlm_probability: float) -> float:
    """Training FLOPs per real token of full `seq_len` sequences on the fast path (sparse MLM head,
    unpadded): three forwards (`bertedu.course.flops.forward_flops`), the NSP head left out."""
    per_sequence = forward_flops(config, [seq_len], seq_len, 0, sparse_mlm=True, unpad=True)
    head = forward_flops(config, [seq_len], seq_len, seq_len, sparse_mlm=True, unpad=True)["MLM head"]
    body = per_sequence["dense layers"] + per_sequence["attention"] + mlm_probability * head
    return 3 * body / seq_len


def common(vocab: Path, out: Path, seed: int, tokens: int) -> list[str]:
    return ["pretrain", "--preset", "mini", "--corpus", "wiki-en", "--vocab", str(vocab),
            "--max-seq-length", str(SEQ), "--batch-size", "16", "--warmup-ratio", "0.06",
            "--max-tokens", str(tokens), "--max-eval-examples", "32", "--no-progress",
            "--seed", str(seed), "--out", str(out)]


def cli(args: list[str], threads: int) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
    done = subprocess.run([sys.executable, "-m", "bertedu.cli", *args], env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"bertedu {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def build_vocab(out: Path, threads: int) -> Path:
    vocab = out / "vocab.txt"
    if not vocab.exists():
        scratch = out / "_vocab-run"
        cli(["pretrain", "--preset", "tiny", "--corpus", "wiki-en", "--steps", "1", "--batch-size", "2",
             "--no-progress", "--max-eval-examples", "2", "--out", str(scratch)], threads)
        vocab.write_bytes((scratch / "vocab.txt").read_bytes())
    return vocab


def run_arm(args, arm: str, seed: int, vocab: Path) -> dict:
    probability, flags = ARMS[arm]
    vocab_size = len(vocab.read_text(encoding="utf-8").splitlines())
    config = dataclasses.replace(BertConfig.mini(), vocab_size=vocab_size)
    per_token = train_flops_per_token(config, SEQ, probability)
    tokens = int(args.flops / per_token)
    folder = Path(args.out) / f"{arm}-s{seed}"
    command = common(vocab, folder, seed, tokens) + flags
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    if not (folder / "metrics.jsonl").exists():
        cli(command, args.threads)
    measured = json.loads(cli(["masked-accuracy", str(folder), "--max-sequences", str(args.eval_sequences)],
                              args.threads).stdout)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    records = [json.loads(line) for line in (folder / "metrics.jsonl").read_text().splitlines() if line.strip()]
    seen = max(r.get("tokens", 0) for r in records)
    row = {"arm": arm, "seed": seed, "command": "bertedu " + " ".join(command), "tokens_budget": tokens,
           "tokens_seen": seen, "steps": max(r.get("step", 0) for r in records),
           "train_flops": seen * per_token, "flops_per_token": per_token,
           "heldout_accuracy": measured["accuracy"], "heldout_loss": measured["loss"],
           "heldout_tokens": measured["tokens"], "wall_s": round(time.perf_counter() - start, 1),
           "cpu_s": round(after.ru_utime + after.ru_stime - before.ru_utime - before.ru_stime, 1)}
    print(json.dumps({k: v for k, v in row.items() if k != "command"}), flush=True)
    return row


def most_frequent_piece_baseline(vocab: Path, max_sequences: int) -> dict:
    """The accuracy of always predicting the most frequent piece of the TRAINING documents, on
    exactly the held-out masks `bertedu masked-accuracy --max-sequences N` draws (its batches of
    32 and seed 0): the unigram plateau both arms start from."""
    import torch

    from bertedu.data.corpora import wiki_en
    from bertedu.data.documents import document_sequences, held_out_split, make_batch, wiki_en_held_out
    from bertedu.data.tokenizer import load_vocab_tokenizer
    from bertedu.model.constants import IGNORE_INDEX

    tokenizer = load_vocab_tokenizer(vocab, impl="fast")
    counts = torch.zeros(tokenizer.vocab_size, dtype=torch.long)
    for ids in document_sequences(held_out_split(list(wiki_en()))[0], tokenizer, SEQ):
        counts += torch.bincount(torch.tensor(ids[1:-1]), minlength=tokenizer.vocab_size)  # [CLS] ... [SEP] dropped
    top = int(counts.argmax())
    sequences = document_sequences(wiki_en_held_out(), tokenizer, SEQ)[:max_sequences]
    generator, right, total = torch.Generator().manual_seed(0), 0, 0
    for start in range(0, len(sequences), 32):
        labels = make_batch(sequences[start:start + 32], tokenizer, generator)[2]  # (B, T)
        right += int((labels == top).sum())
        total += int((labels != IGNORE_INDEX).sum())
    return {"piece": tokenizer.convert_ids_to_tokens([top])[0] if hasattr(tokenizer, "convert_ids_to_tokens")
            else top, "accuracy": right / total, "tokens": total}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--flops", type=float, default=1.5e12, help="training FLOPs per run")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--eval-sequences", type=int, default=128)
    parser.add_argument("--out", default="runs/recipe-compare")
    parser.add_argument("--record", default=str(ROOT / "bertedu/weights/recipe_compare.json"))
    parser.add_argument("--baseline-only", action="store_true",
                        help="add the most-frequent-piece baseline to an existing record, training nothing")
    args = parser.parse_args(argv)
    if args.baseline_only:
        record = json.loads(Path(args.record).read_text())
        record["most_frequent_piece"] = most_frequent_piece_baseline(Path(args.out) / "vocab.txt", args.eval_sequences)
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
        return
    Path(args.out).mkdir(parents=True, exist_ok=True)
    vocab = build_vocab(Path(args.out), args.threads)
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = [run_arm(args, arm, seed, vocab) for seed in seeds for arm in ARMS]
    baseline = most_frequent_piece_baseline(vocab, args.eval_sequences)
    acc = {arm: [r["heldout_accuracy"] for r in rows if r["arm"] == arm] for arm in ARMS}
    result = compare(acc["budget"], acc["bert"], "budget", "bert")
    record = {"command": "python benchmarks/recipe_compare.py " + " ".join(sys.argv[1:] if argv is None else argv),
              "flops_per_run": args.flops, "seeds": seeds, "threads": args.threads,
              "cpu_s_total": round(sum(r["cpu_s"] for r in rows), 1), "rows": rows,
              "most_frequent_piece": baseline,
              "comparison": {"budget_mean": result.mean_a, "bert_mean": result.mean_b, "difference": result.difference,
                             "standard_error": result.se, "pairs": len(seeds)}}
    Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    print(json.dumps(record["comparison"]))


if __name__ == "__main__":
    main()
