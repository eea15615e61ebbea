"""Pretraining examples for corpora larger than memory: built shard by shard, kept on disk.

`build_pretraining_dataset` holds the whole tokenised corpus and every NSP pair in
memory: right for the embedded corpora (a few MB of text), not for a Wikipedia dump. Here
the documents are read as a stream, `shard_documents` at a time; each shard is tokenised,
cut into NSP pairs by `create_pretraining_examples` (NotNext segments come from another
document of the same shard, as google-research/bert's script draws them from the input
files it was given together), and appended to flat binary files. Memory holds one shard,
whatever the corpus size. Training then reads the pairs through `ExampleStore`, a
memory-mapped sequence that `PretrainingDataset` masks exactly as it masks a list.

    store = write_pretraining_examples(load_corpus("wiki-en"), tokenizer, "runs/x/examples")
    dataset = PretrainingDataset(store, mask_token_id=..., vocab_size=..., ...)

The folder (written under a temporary name and renamed when complete, so a half-written
folder is never mistaken for a finished one):

    input_ids.bin     int32, every example's ids laid end to end
    word_starts.bin   uint8, 1 where a token begins a word (only if the tokens had words)
    index.bin         int64 rows (offset, length, len_a, next_sentence_label), one per example
    meta.json         counts and the settings the examples were made with
"""

from __future__ import annotations

import hashlib
import itertools
import json
import os
import random
import shutil
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .pretraining import (
    PretrainingExample,
    create_pretraining_examples,
    tokenize_documents,
)

META_NAME = "meta.json"
INDEX_COLUMNS = 4  # offset, length, len_a, next_sentence_label


def vocab_fingerprint(tokenizer) -> str:
    """A short hash of the vocabulary: examples are ids, only valid with the same vocab."""
    tokens = sorted(tokenizer.vocab.items(), key=lambda item: item[1])
    text = "\n".join(token for token, _ in tokens)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def shards(documents: Iterable, shard_documents: int) -> Iterator[list]:
    """Group a stream of documents into lists of `shard_documents` (the last one may be
    larger: a lone final document joins the shard before it, since a NotNext pair needs a
    second document)."""
    if shard_documents < 2:
        raise ValueError(f"shard_documents must be at least 2 (NotNext needs another document), got {shard_documents}")
    stream = iter(documents)
    pending = list(itertools.islice(stream, shard_documents))
    while pending:
        following = list(itertools.islice(stream, shard_documents))
        if len(following) == 1:
            pending, following = pending + following, []
        yield pending
        pending = following


def _has_text(document) -> bool:
    return any(len(sentence) > 0 for sentence in document)


def write_pretraining_examples(
    documents: Iterable,
    tokenizer,
    folder: str | os.PathLike,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    nsp_prob: float = 0.5,
    *,
    seed: int = 0,
    shard_documents: int = 10_000,
    progress: bool = False,
) -> ExampleStore:
    """Stream `documents` into an `ExampleStore` at `folder`, one shard in memory at a time.

    documents: any iterable of documents (a `Corpus`, a generator); read once, lazily.
        A document is a list of sentences, as `build_pretraining_dataset` takes them.
    tokenizer: a bertedu tokenizer (its vocabulary is fingerprinted into meta.json).
    max_seq_length, short_seq_prob, nsp_prob: see `create_pretraining_examples`.
    seed: seeds the pairing (one `random.Random` across all shards).
    shard_documents: documents per shard; NotNext segments come from the same shard.

    Returns the store. Raises FileExistsError if `folder` exists (open it with
    `ExampleStore(folder)`, or delete it to rebuild).
    """
    folder = Path(folder)
    partial = _partial_folder(folder)
    rng = random.Random(seed)

    def make_examples(tokenized):
        return create_pretraining_examples(tokenized, max_seq_length, short_seq_prob, nsp_prob, rng,
                                           vocab=tokenizer.vocab)

    texts = (d for d in documents if _has_text(d))  # empty documents make no pairs
    counts, has_words = _write_shards(texts, tokenizer, make_examples, partial, shard_documents, progress)
    n_examples, n_tokens, n_documents, n_shards = counts
    if n_examples == 0:
        shutil.rmtree(partial)
        raise ValueError("No examples: the documents are empty.")
    if not has_words:
        (partial / "word_starts.bin").unlink()
    meta = {
        "examples": n_examples, "tokens": n_tokens, "documents": n_documents, "shards": n_shards,
        "has_word_ids": bool(has_words), "max_seq_length": max_seq_length, "short_seq_prob": short_seq_prob,
        "nsp_prob": nsp_prob, "seed": seed, "shard_documents": shard_documents,
        "vocab_size": len(tokenizer.vocab), "vocab": vocab_fingerprint(tokenizer),
    }
    (partial / META_NAME).write_text(json.dumps(meta, indent=2) + "\n", encoding="utf-8")
    os.replace(partial, folder)  # complete: only now does the folder exist under its name
    return ExampleStore(folder)


def _write_shards(texts: Iterable, tokenizer, make_examples: Callable, partial: Path, shard_documents: int,
                  progress: bool) -> tuple[tuple[int, int, int, int], bool]:
    """Tokenize `texts` a shard at a time, make each shard's examples and append them to partial's
    .bin files: ((examples, tokens, documents, shards), whether every example has word starts)."""
    from tqdm.auto import tqdm

    n_examples = n_tokens = n_documents = n_shards = 0
    has_words = None
    with open(partial / "input_ids.bin", "wb") as ids_file, open(partial / "index.bin", "wb") as index_file, \
            open(partial / "word_starts.bin", "wb") as words_file, \
            tqdm(desc="documents", unit="doc", disable=not progress) as bar:
        for shard in shards(texts, shard_documents):
            examples = make_examples(tokenize_documents(shard, tokenizer, n_documents))
            shard_words = all(e.word_ids is not None for e in examples)
            has_words = shard_words if has_words is None else has_words and shard_words
            _append_examples(examples, n_tokens, index_file, ids_file, words_file if has_words else None)
            n_tokens += sum(len(e) for e in examples)
            n_examples += len(examples)
            n_documents += len(shard)
            n_shards += 1
            bar.update(len(shard))
    return (n_examples, n_tokens, n_documents, n_shards), bool(has_words)


def _partial_folder(folder: Path) -> Path:
    """A new empty folder to build `folder` in; renamed to `folder` once complete."""
    if folder.exists():
        raise FileExistsError(f"{folder} exists: open it with ExampleStore({str(folder)!r}) or delete it to rebuild")
    partial = folder.with_name(folder.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)  # an interrupted earlier build
    partial.mkdir(parents=True)
    return partial


def _append_examples(examples: Sequence[PretrainingExample], offset: int, index_file, ids_file, words_file) -> None:
    """Append a shard's examples to the open files; their ids start at token `offset`.

    index.bin gets one row (offset, length, len_a, next_sentence_label) per example,
    input_ids.bin the ids end to end, word_starts.bin (when given) a 1 where a word begins.
    """
    rows = np.empty((len(examples), INDEX_COLUMNS), dtype=np.int64)
    for j, e in enumerate(examples):
        len_a = e.token_type_ids.index(1) - 2  # B [SEP] always has token type 1
        rows[j] = (offset, len(e), len_a, e.next_sentence_label)
        offset += len(e)
    rows.tofile(index_file)
    np.fromiter(itertools.chain.from_iterable(e.input_ids for e in examples), dtype=np.int32).tofile(ids_file)
    if words_file is not None:
        word_ids = np.fromiter(itertools.chain.from_iterable(e.word_ids for e in examples), dtype=np.int64)
        previous = np.concatenate(([-1], word_ids[:-1]))  # across examples: a [SEP] then a [CLS], both -1
        ((word_ids != -1) & (word_ids != previous)).astype(np.uint8).tofile(words_file)  # 1 where a word begins


class ExampleStore(Sequence):
    """The NSP pairs of a `write_pretraining_examples` folder, read memory-mapped.

    `store[i]` is a `PretrainingExample` rebuilt from disk (token types from the length
    of A, special tokens at [CLS] and the two [SEP]s, word ids from the word starts);
    `doc_a`/`doc_b` are -1 and the spans (0, 0): document positions are not kept.
    Only the pages an example lives on are read, so the corpus need not fit in memory.
    """

    def __init__(self, folder: str | os.PathLike):
        self.folder = Path(folder)
        meta_path = self.folder / META_NAME
        if not meta_path.exists():
            raise FileNotFoundError(
                f"{self.folder} holds no finished example store (no {META_NAME}); build it with write_pretraining_examples()"
            )
        self.meta = json.loads(meta_path.read_text(encoding="utf-8"))
        self.has_word_ids = bool(self.meta["has_word_ids"])
        self.input_ids = np.memmap(self.folder / "input_ids.bin", dtype=np.int32, mode="r")
        self.index = np.memmap(self.folder / "index.bin", dtype=np.int64, mode="r").reshape(-1, INDEX_COLUMNS)
        self.word_starts = (
            np.memmap(self.folder / "word_starts.bin", dtype=np.uint8, mode="r") if self.has_word_ids else None
        )
        if len(self.index) != self.meta["examples"] or len(self.input_ids) != self.meta["tokens"]:
            raise ValueError(f"{self.folder}: the files do not match {META_NAME}; delete the folder and rebuild it")

    def check(self, tokenizer, max_seq_length: int) -> None:
        """Raise if the store was made with another vocabulary or sequence length."""
        if self.meta["vocab"] != vocab_fingerprint(tokenizer):
            raise ValueError(f"{self.folder} was built with another vocabulary; delete it to rebuild")
        if self.meta["max_seq_length"] != max_seq_length:
            raise ValueError(
                f"{self.folder} holds examples of max_seq_length={self.meta['max_seq_length']}, not "
                f"{max_seq_length}; delete it to rebuild"
            )

    def __len__(self) -> int:
        return len(self.index)

    def __getitem__(self, i):
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        if not -len(self) <= i < len(self):
            raise IndexError(f"index {i} is out of range for a store of {len(self)} examples")
        offset, length, len_a, label = (int(v) for v in self.index[i])
        input_ids = self.input_ids[offset : offset + length].tolist()
        len_b = length - len_a - 3
        word_ids = None
        if self.has_word_ids:
            word_ids, word = [], -1
            for j, start in enumerate(self.word_starts[offset : offset + length].tolist()):
                special = j in (0, len_a + 1, length - 1)
                word += bool(start)
                word_ids.append(-1 if special else word)
        return PretrainingExample(
            input_ids=input_ids,
            token_type_ids=[0] * (len_a + 2) + [1] * (len_b + 1),  # [CLS] A [SEP] | B [SEP]
            special_tokens_mask=[1] + [0] * len_a + [1] + [0] * len_b + [1],
            next_sentence_label=label,
            word_ids=word_ids,
            doc_a=-1,
            doc_b=-1,
            span_a=(0, 0),
            span_b=(0, 0),
        )

    def __repr__(self) -> str:
        return f"ExampleStore({str(self.folder)!r}, examples={len(self)}, tokens={self.meta['tokens']})"
