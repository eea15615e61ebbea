"""Held-out masked-token accuracy of the course's masked LMs at 64 and at 128 tokens.

    python benchmarks/course_lengths.py course-en course-zh course-zh-wwm --out bertedu/weights/course_lengths.json

Each model (a shipped name or a pretraining run's folder) is measured on the documents its
own run held out (its run.json's --corpus, --eval-documents and --seed, or for a --packing
documents run the fixed seed that packing splits with: text it never trained on). Each document's word pieces are masked once per mask seed (15% selected; 80% [MASK], 10%
random, 10% kept: `make_batch` over the whole document), and the same corrupted pieces are then
cut into `[CLS] pieces [SEP]` runs of each --lengths value: every length reads the same masked
tokens with the same corruption around them, so the lengths differ only in how much context a
run holds (a paired comparison; the last run of a document may be short). Per position, the
selected tokens and those predicted right are kept (summed over the seeds), so notebook 07 can
draw accuracy by position; the difference between the last and the first length is recorded
with its standard error, clustered by document piece (a piece selected under several seeds
counts once). Beside it, the run's held-out sentence pairs (`pairs_accuracy`). --label names
the entry (default: the model's name); a run adds to the JSON file, replacing entries of the
same label.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from bertedu.data.corpora import load_corpus
from bertedu.data.documents import document_sequences, make_batch, split_documents
from bertedu.model.constants import IGNORE_INDEX
from bertedu.pretrained import trained_length
from bertedu.training.pretrain import held_out_seed, load_masked_lm_or_run, run_config


def held_out_documents(name: str, max_documents: int) -> list:
    """The documents the run behind `name` held out (its run.json's --corpus, --eval-documents
    and --seed, split as `bertedu pretrain` split them: `held_out_seed`), the first
    `max_documents` of them, as lists of sentences."""
    cfg = run_config(name)
    documents = list(load_corpus(cfg.corpus))[: cfg.max_documents]
    return split_documents(documents, cfg.eval_documents, held_out_seed(cfg))[1][:max_documents]


@torch.no_grad()
def pairs_accuracy(model, tokenizer, name: str, length: int) -> dict:
    """Masked-token accuracy on the run's held-out documents as sentence pairs rebuilt at `length`:
    `[CLS] A [SEP] B [SEP]` with their segment ids, one fixed mask each, as a `--packing pairs`
    run's own evaluation reads them (`heldout_dataset`; so also for a run that trained on other
    packings), all of them; with counts by position."""
    from bertedu.data import collate_pretraining
    from bertedu.training.pretrain import heldout_dataset

    data = heldout_dataset(run_config(name, max_seq_length=length, max_eval_examples=10**6, packing="pairs"), tokenizer)
    hits = torch.zeros(length, dtype=torch.long)  # (T,)
    seen = torch.zeros(length, dtype=torch.long)  # (T,)
    for start in range(0, len(data), 32):
        batch = collate_pretraining([data[i] for i in range(start, min(start + 32, len(data)))],
                                    pad_token_id=tokenizer.pad_token_id)
        hidden = model.bert(batch["input_ids"], token_type_ids=batch["token_type_ids"],
                            attention_mask=batch["attention_mask"]).last_hidden_state  # (B, T, D)
        labels = batch["labels"]  # (B, T)
        selected = labels != IGNORE_INDEX
        right = model.mlm(hidden[selected]).argmax(-1) == labels[selected]  # (M,)
        position = selected.nonzero()[:, 1]
        hits += torch.bincount(position, weights=right.double(), minlength=length)[:length].long()
        seen += torch.bincount(position, minlength=length)[:length]
    return {"accuracy": int(hits.sum()) / max(int(seen.sum()), 1), "tokens": int(seen.sum()), "examples": len(data),
            "correct_by_position": hits.tolist(), "tokens_by_position": seen.tolist()}


def corrupted_documents(documents: list, tokenizer, seed: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(input ids, labels) of each document's pieces, masked once from `seed` (`make_batch` on
    the whole document as one run, its [CLS] and [SEP] then dropped): labels hold the selected
    pieces' ids, IGNORE_INDEX elsewhere."""
    generator = torch.Generator().manual_seed(seed)
    corrupted = []
    for document in documents:
        whole = document_sequences([document], tokenizer, 10**9)  # [CLS] every piece [SEP]
        if whole:
            ids, _, labels = make_batch(whole, tokenizer, generator)  # (1, N+2) each
            corrupted.append((ids[0, 1:-1], labels[0, 1:-1]))
    return corrupted


def runs_of(corrupted: list, tokenizer, length: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The corrupted documents cut into `[CLS] pieces [SEP]` runs of at most `length` ids, in
    document order (labels IGNORE_INDEX at [CLS] and [SEP])."""
    body, runs = length - 2, []
    cls, sep, ignore = (torch.tensor([i]) for i in (tokenizer.cls_token_id, tokenizer.sep_token_id, IGNORE_INDEX))
    for ids, labels in corrupted:
        for start in range(0, len(ids), body):
            runs.append((torch.cat([cls, ids[start:start + body], sep]),
                         torch.cat([ignore, labels[start:start + body], ignore])))
    return runs


@torch.no_grad()
def right_by_token(model, tokenizer, corrupted: list, length: int, batch_size: int = 32):
    """(right, position): for every selected piece, in document order, whether the model
    predicts it from runs of `length`, and its position in its run."""
    runs = runs_of(corrupted, tokenizer, length)
    right, position = [], []
    for start in range(0, len(runs), batch_size):
        batch = runs[start:start + batch_size]
        ids = torch.nn.utils.rnn.pad_sequence([r[0] for r in batch], batch_first=True,
                                              padding_value=tokenizer.pad_token_id)  # (B, T)
        labels = torch.nn.utils.rnn.pad_sequence([r[1] for r in batch], batch_first=True,
                                                 padding_value=IGNORE_INDEX)  # (B, T)
        sizes = torch.tensor([len(r[0]) for r in batch])
        attention_mask = torch.arange(ids.shape[1]) < sizes[:, None]  # (B, T): the run, not its padding
        hidden = model.bert(ids, attention_mask=attention_mask.long()).last_hidden_state  # (B, T, D)
        selected = labels != IGNORE_INDEX
        right.append(model.mlm(hidden[selected]).argmax(-1) == labels[selected])  # (M,)
        position.append(selected.nonzero()[:, 1])
    return torch.cat(right), torch.cat(position)


def clustered_mean_se(values: torch.Tensor, cluster: torch.Tensor) -> tuple[float, float]:
    """Mean of `values` and its standard error when the values of one cluster (a document piece
    scored under several mask seeds) are not independent: sqrt(sum_c (S_c - n_c mean)^2) / N."""
    values = values.double()
    mean = values.mean()
    sums = torch.bincount(cluster, weights=values)
    counts = torch.bincount(cluster).double()
    return float(mean), float(((sums - counts * mean) ** 2).sum().sqrt() / len(values))


def paired_lengths(model, tokenizer, documents: list, lengths: list[int], seeds: int) -> tuple[dict, dict]:
    """Per length, accuracy (with its clustered standard error), masked tokens and counts by
    position over `seeds` mask seeds; and the last length's accuracy minus the first's, paired
    token by token, with its standard error."""
    right = {length: [] for length in lengths}
    measured = {length: {"hits": torch.zeros(length), "seen": torch.zeros(length)} for length in lengths}
    clusters = []
    for seed in range(seeds):
        corrupted = corrupted_documents(documents, tokenizer, seed)
        offsets = torch.tensor([0] + [len(ids) for ids, _ in corrupted]).cumsum(0)[:-1]
        clusters.append(torch.cat([offset + (labels != IGNORE_INDEX).nonzero()[:, 0]
                                   for offset, (_, labels) in zip(offsets, corrupted)]))
        for length in lengths:
            hit, position = right_by_token(model, tokenizer, corrupted, length)
            right[length].append(hit)
            measured[length]["hits"] += torch.bincount(position, weights=hit.double(), minlength=length).float()
            measured[length]["seen"] += torch.bincount(position, minlength=length).float()
    cluster = torch.cat(clusters)
    entry = {}
    for length in lengths:
        accuracy, se = clustered_mean_se(torch.cat(right[length]), cluster)
        entry[str(length)] = {"accuracy": accuracy, "se": se, "tokens": len(cluster),
                              "correct_by_position": measured[length]["hits"].long().tolist(),
                              "tokens_by_position": measured[length]["seen"].long().tolist()}
    first, last = lengths[0], lengths[-1]
    difference = torch.cat(right[last]).double() - torch.cat(right[first]).double()
    mean, se = clustered_mean_se(difference, cluster)
    return entry, {"lengths": [last, first], "mean": mean, "se": se}


def measure(name: str, lengths: list[int], max_documents: int, seeds: int) -> dict:
    torch.manual_seed(0)
    model, tokenizer = load_masked_lm_or_run(name)
    model.float()
    documents = held_out_documents(name, max_documents)
    one_segment, difference = paired_lengths(model, tokenizer, documents, lengths, seeds)
    entry = {"model": name, "trained_at": trained_length(name), "corpus": run_config(name).corpus,
             "documents": len(documents), "mask_seeds": seeds, "lengths": one_segment, "difference": difference,
             "pairs": {str(length): pairs_accuracy(model, tokenizer, name, length) for length in lengths}}
    for length in lengths:
        measured, pairs = one_segment[str(length)], entry["pairs"][str(length)]
        print(f"{name:>22} at {length:>3}: accuracy {measured['accuracy']:.3f} ± {measured['se']:.3f} over "
              f"{measured['tokens']:,} masked tokens of one-segment runs; {pairs['accuracy']:.3f} over "
              f"{pairs['tokens']:,} in held-out sentence pairs", flush=True)
    print(f"{name:>22} at {lengths[-1]} minus at {lengths[0]}, paired: {difference['mean']:+.4f} ± "
          f"{difference['se']:.4f}", flush=True)
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="shipped masked LM names or pretraining run folders")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--max-documents", type=int, default=200, help="held-out documents read (first N)")
    parser.add_argument("--mask-seeds", type=int, default=5, help="mask draws per document (seeds 0..N-1)")
    parser.add_argument("--label", nargs="*", help="one name per model for the JSON file (default: the model's)")
    parser.add_argument("--out", type=Path, help="JSON file to add the entries to")
    args = parser.parse_args(argv)
    labels = args.label or args.models
    if len(labels) != len(args.models):
        parser.error("--label needs one name per model")
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out and args.out.exists() else {}
    for label, name in zip(labels, args.models):
        results[label] = measure(name, args.lengths, args.max_documents, args.mask_seeds)
        results[label]["command"] = "python " + " ".join(sys.argv)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
