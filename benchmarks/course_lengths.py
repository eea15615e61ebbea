"""Held-out masked-token accuracy of the course's masked LMs at 64 and at 128 tokens.

    python benchmarks/course_lengths.py course-en course-zh course-zh-wwm --out bertedu/weights/course_lengths.json

Each model (a shipped name or a pretraining run's folder) is measured on the documents its
own run held out (its run.json's --corpus, --eval-documents and --seed: text it never trained
on), the same documents cut into `[CLS] pieces [SEP]` runs of each --lengths value
(`bertedu.training.heldout.masked_accuracy`, masks drawn from seed 0). Per position, the
selected tokens and those predicted right are kept, so notebook 07 can draw accuracy by
position. --label names the entry (default: the model's name); a run adds to the JSON file,
replacing entries of the same label.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch

from bertedu.data.corpora import load_corpus
from bertedu.data.documents import split_documents
from bertedu.pretrained import trained_length
from bertedu.training.heldout import masked_accuracy
from bertedu.training.pretrain import load_masked_lm_or_run, run_config


def held_out_documents(name: str, max_documents: int) -> list:
    """The documents the run behind `name` held out (its run.json's --corpus, --eval-documents
    and --seed, split as `bertedu pretrain`'s in-memory pairs path splits them), the first
    `max_documents` of them, as lists of sentences."""
    cfg = run_config(name)
    documents = list(load_corpus(cfg.corpus))[: cfg.max_documents]
    return split_documents(documents, cfg.eval_documents, cfg.seed)[1][:max_documents]


@torch.no_grad()
def pairs_accuracy(model, tokenizer, name: str, length: int) -> dict:
    """Masked-token accuracy on the run's own held-out examples rebuilt at `length`: sentence
    pairs `[CLS] A [SEP] B [SEP]` with their segment ids, one fixed mask each, as the run's own
    evaluation reads them (`heldout_dataset`), all of them; with counts by position."""
    from bertedu.data import collate_pretraining
    from bertedu.model.constants import IGNORE_INDEX
    from bertedu.training.pretrain import heldout_dataset

    data = heldout_dataset(run_config(name, max_seq_length=length, max_eval_examples=10**6), tokenizer)
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


def measure(name: str, lengths: list[int], max_documents: int) -> dict:
    torch.manual_seed(0)
    model, tokenizer = load_masked_lm_or_run(name)
    model.float()
    documents = held_out_documents(name, max_documents)
    entry = {"model": name, "trained_at": trained_length(name), "corpus": run_config(name).corpus,
             "documents": len(documents), "lengths": {}}
    for length in lengths:
        measured = masked_accuracy(model, tokenizer, documents, seed=0, max_seq_length=length, by_position=True)
        entry["lengths"][str(length)] = measured
        pairs = entry.setdefault("pairs", {})[str(length)] = pairs_accuracy(model, tokenizer, name, length)
        print(f"{name:>22} at {length:>3}: accuracy {measured['accuracy']:.3f} over {measured['tokens']:,} masked "
              f"tokens of one-segment runs; {pairs['accuracy']:.3f} over {pairs['tokens']:,} in the run's own "
              "held-out sentence pairs", flush=True)
    return entry


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("models", nargs="+", help="shipped masked LM names or pretraining run folders")
    parser.add_argument("--lengths", type=int, nargs="+", default=[64, 128])
    parser.add_argument("--max-documents", type=int, default=200, help="held-out documents read (first N)")
    parser.add_argument("--label", nargs="*", help="one name per model for the JSON file (default: the model's)")
    parser.add_argument("--out", type=Path, help="JSON file to add the entries to")
    args = parser.parse_args(argv)
    labels = args.label or args.models
    if len(labels) != len(args.models):
        parser.error("--label needs one name per model")
    results = json.loads(args.out.read_text(encoding="utf-8")) if args.out and args.out.exists() else {}
    for label, name in zip(labels, args.models):
        results[label] = measure(name, args.lengths, args.max_documents)
        results[label]["command"] = "python " + " ".join(sys.argv)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
