"""Real tokens per CPU-second of the pretraining data path (issue 52 item 3).

The whole path a DataLoader worker runs for one batch: read the pairs from the streamed
store (`ExampleStore`, memory-mapped, as `pretrain --stream` reads them), mask them and
pad them into a batch. Two ways to mask, same store, same batches:

    per-example   PretrainingDataset[i] masks each pair with its own generator
                  (seed, epoch, index), then `collate` pads: today's path, resumable exactly
    batch         `PretrainingDataset.masked_batch`: the unmasked pairs padded first, then
                  one `mask_tokens` call on the whole (B, T) batch, its generator seeded
                  from (seed, epoch, the batch's indices): reproducible for a seed

A batch holds 256 x 128 positions at every length (64 x 512). Timed with time.process_time (CPU time of this process), one thread, after one warm-up
batch; each repeat runs `--batches` batches; the median and the spread over the repeats
are printed. Real tokens are the non-padding positions of the batches.

    python benchmarks/data_path.py --threads 1 --repeats 5
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

from bertedu.data.corpora import load_corpus
from bertedu.data.pretraining import PretrainingDataset
from bertedu.data.stream import write_pretraining_examples
from bertedu.data.tokenizer import load_vocab_tokenizer

VOCAB = Path(__file__).resolve().parents[1] / "bertedu" / "weights" / "course-en" / "vocab.txt"
H100_NEED = (0.55e6, 0.73e6)  # real tokens/s at 30-40% MFU on BERT-BASE at 128 (issue 52)


def per_example_batch(dataset, indices):
    return dataset.collate([dataset[i] for i in indices])


def whole_batch(dataset, indices):
    return dataset.masked_batch(indices)


def timed(make, dataset, batches):
    """(real tokens, CPU seconds) of making `batches` (lists of indices) with `make`."""
    make(dataset, batches[0])  # warm-up
    real, start = 0, time.process_time()
    for indices in batches:
        real += int(make(dataset, indices)["attention_mask"].sum())
    return real, time.process_time() - start


def measure(store, tokenizer, batch_size: int, n_batches: int, repeats: int):
    dataset = PretrainingDataset(store, mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size,
                                 pad_token_id=tokenizer.pad_token_id, special_ids=sorted(tokenizer.special_ids))
    order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(0)).tolist()
    batches = [order[i * batch_size:(i + 1) * batch_size] for i in range(n_batches)]
    results = {}
    for name, make in (("per-example", per_example_batch), ("batch", whole_batch)):
        rates = []
        for _ in range(repeats):
            real, seconds = timed(make, dataset, batches)
            rates.append(real / seconds)
        results[name] = dict(median=statistics.median(rates), low=min(rates), high=max(rates),
                             real_tokens_per_batch=real / n_batches)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--batches", type=int, default=8)
    parser.add_argument("--batch-size", type=int, default=256, help="sequences per batch at 128 (fewer at 512)")
    parser.add_argument("--lengths", type=int, nargs="+", default=[128, 512])
    parser.add_argument("--json", type=str, default=None, help="also write the results here")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    tokenizer = load_vocab_tokenizer(VOCAB, impl="fast")
    documents = list(load_corpus("wiki-en"))
    record = dict(command="python benchmarks/" + Path(__file__).name + " " + " ".join(sys.argv[1:] if argv is None else argv),
                  corpus="wiki-en", vocab="course-en", threads=args.threads,
                  positions_per_batch=args.batch_size * 128, lengths={})
    with tempfile.TemporaryDirectory() as tmp:
        for T in args.lengths:
            store = write_pretraining_examples(documents, tokenizer, Path(tmp) / f"store-{T}", max_seq_length=T)
            batch_size = args.batch_size * 128 // T  # the same positions per batch at every length
            n_batches = min(args.batches, len(store) // batch_size)  # wiki-en holds ~1k pairs of 512
            results = measure(store, tokenizer, batch_size, n_batches, args.repeats)
            record["lengths"][T] = results
            for name, r in results.items():
                workers = [need / r["median"] for need in H100_NEED]
                print(f"T={T:4d} B={batch_size:3d} x{n_batches} {name:12s} {r['median'] / 1e6:6.3f}M real tokens/CPU-s "
                      f"(range {r['low'] / 1e6:.3f}-{r['high'] / 1e6:.3f}, {r['real_tokens_per_batch']:.0f} real/batch); "
                      f"H100 at 30-40% MFU needs {workers[0]:.1f}-{workers[1]:.1f} cores")
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=2) + "\n")
    return record


if __name__ == "__main__":
    main()
