"""Pretraining examples: NSP sentence pairs, and the data set that masks them for MLM.

Introduced in the pretraining-data notebook. The recipe is the BERT paper's (Devlin et al.
2019, section 3.1 and appendix A.2), as google-research/bert's create_pretraining_data.py
makes it:

1. A document is a list of sentences, already cut into WordPiece tokens.
2. Consecutive sentences are packed into a chunk until it holds `target` tokens, where
   `target = max_seq_length - 3` (room for [CLS] and two [SEP]) or, with probability
   `short_seq_prob`, a random shorter length, so that the model also sees the short inputs
   of fine-tuning.
3. The chunk is cut after a random sentence: A = the first part. B = the rest (IsNext,
   label 0) or, with probability `nsp_prob`, a span of random length from a *different*
   document (NotNext, label 1); the chunk's unused sentences are "put back" and start
   the next chunk.
4. While A + B is too long, the longer segment loses a token from its front or its back
   (a coin flip each time).
5. `[CLS] A [SEP] B [SEP]`, token_type_ids 0 on `[CLS] A [SEP]` and 1 on `B [SEP]`.

Then `PretrainingDataset` masks 15% of the tokens (`mask_tokens`), once when it is built
(static, the original) or freshly each time an example is seen (dynamic, RoBERTa).

    >>> dataset = build_pretraining_dataset(documents, tokenizer, max_seq_length=128, seed=0)
    >>> loader = DataLoader(dataset, batch_size=32, shuffle=True, collate_fn=dataset.collate)
    >>> batch = next(iter(loader))       # input_ids, token_type_ids, attention_mask, labels,
    >>> model(**batch).loss              # next_sentence_label: what BertForPreTraining takes

Deliberate differences from the original script (none changes what an example is):

- A chunk of a single sentence is cut inside the sentence for an IsNext pair. The
  original always made such chunks NotNext, which pushes the NotNext share above 50%
  (a document's last chunk is often one sentence). Here only a one-token chunk is forced
  to NotNext, so the share stays at `nsp_prob`.
- The shorter target length is drawn for every chunk (the original drew it once per
  document), so `short_seq_prob` is the share of examples with a short target.
- The random document is drawn among the *other* documents (the original retried ten
  times and could, rarely, pair a document with itself).
- Examples are not shuffled: shuffle when loading (the DataLoader or a seeded sampler).
- The original's `dupe_factor` re-runs this whole procedure, so each copy also has new
  pairs; here `dupe_factor` (of `PretrainingDataset`) gives each pair several masks. For
  new pairs too, call `create_pretraining_examples` again with the same `rng`.
"""

from __future__ import annotations

import hashlib
import itertools
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import torch

from ..errors import SettingError
from ..model.constants import IGNORE_INDEX
from .masking import SELECTIONS, mask_tokens, segmented_word_ids
from .padding import pad_rows

IS_NEXT, NOT_NEXT = 0, 1  # next_sentence_label, as in transformers and bertedu.model.heads
MASKINGS = ("static", "dynamic")
PACKINGS = ("pairs", "full-sentences")  # BERT's NSP pairs; RoBERTa's blocks across documents


@dataclass
class PretrainingExample:
    """One NSP pair, `[CLS] A [SEP] B [SEP]`, not yet masked. All lists have length T.

    `word_ids` (-1 on [CLS]/[SEP]) is None when the tokens came as ids without word
    boundaries. For checks and pictures: A is tokens `span_a = (start, end)` of document
    `doc_a` (its sentences' tokens laid end to end), B is `span_b` of `doc_b`.
    """

    input_ids: list[int]
    token_type_ids: list[int]
    special_tokens_mask: list[int]
    next_sentence_label: int
    word_ids: list[int] | None
    doc_a: int
    doc_b: int
    span_a: tuple[int, int]
    span_b: tuple[int, int]

    def __len__(self) -> int:
        return len(self.input_ids)

    @property
    def is_random_next(self) -> bool:
        return self.next_sentence_label == NOT_NEXT


@dataclass
class _Document:
    """A document's tokens laid end to end: `ids[starts[s]:starts[s + 1]]` is sentence s."""

    index: int  # its position in the caller's list
    ids: list[int]
    starts: list[int]  # n_sentences + 1 offsets
    word_starts: list[bool] | None  # True where a token begins a word

    @property
    def n_sentences(self) -> int:
        return len(self.starts) - 1


# ----------------------------------------------------------------------------------------
# Building the pairs
# ----------------------------------------------------------------------------------------


def create_pretraining_examples(
    documents: Sequence[Sequence],
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    nsp_prob: float = 0.5,
    rng: random.Random | int = 0,
    *,
    vocab: Mapping[str, int] | None = None,
    cls_token_id: int | None = None,
    sep_token_id: int | None = None,
) -> list[PretrainingExample]:
    """NSP sentence pairs from documents, as the BERT paper makes them (see the module doc).

    Introduced in the pretraining-data notebook.

    Args:
        documents: a list of documents; a document is a list of sentences; a sentence is
            a list of WordPiece tokens (str: `##` marks a piece that continues a word),
            a list of ids (int: no word boundaries, so no whole-word masking), or a pair
            `(tokens, word_ids)` giving the words (`segmented_word_ids` makes one from a
            segmented Chinese sentence). Empty sentences and documents are skipped.
        max_seq_length: the most tokens per example, [CLS] and [SEP]s included.
        short_seq_prob: probability of a random shorter target length for a chunk.
        nsp_prob: probability that B comes from another document (NotNext).
        rng: a `random.Random`, or an int seed for one.
        vocab: token -> id (or a tokenizer, whose `.vocab` is used) when tokens are str;
            unknown tokens become [UNK].
        cls_token_id, sep_token_id: needed when tokens are ids (101 and 102 in the uncased
            vocabulary, 2 and 3 in one trained by `train_wordpiece`); taken from `vocab`
            when tokens are str.

    Returns a list of `PretrainingExample`, in document order (shuffle when loading).
    """
    if max_seq_length < 5:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room: [CLS] A [SEP] B [SEP] needs at least 5.")
    for name, value in (("short_seq_prob", short_seq_prob), ("nsp_prob", nsp_prob)):
        if not 0.0 <= value <= 1.0:
            raise SettingError(f"{name} must be a probability in [0, 1], got {value}.")
    rng = rng if isinstance(rng, random.Random) else random.Random(rng)
    docs, cls_id, sep_id = _prepare_documents(documents, vocab, cls_token_id, sep_token_id)
    if not docs:
        raise ValueError("No tokens in any document: the corpus is empty (or every sentence is).")
    if nsp_prob > 0 and len(docs) < 2:
        raise ValueError(
            "NotNext pairs take segment B from another document, but the corpus has only one "
            "non-empty document. Split it into documents (a blank line between them in the "
            "BERT text format), or pass nsp_prob=0."
        )
    max_tokens = max_seq_length - 3  # room for [CLS], [SEP], [SEP]
    examples = []
    for doc_position, doc in enumerate(docs):
        examples += _examples_from_document(
            doc_position, docs, max_tokens, short_seq_prob, nsp_prob, rng, cls_id, sep_id
        )
    return examples


def create_packed_examples(
    documents: Sequence[Sequence],
    max_seq_length: int = 128,
    *,
    vocab: Mapping[str, int] | None = None,
    cls_token_id: int | None = None,
    sep_token_id: int | None = None,
) -> list[PretrainingExample]:
    """RoBERTa's FULL-SENTENCES inputs, `[CLS] block [SEP]`, as `PretrainingExample`s.

    Each block holds whole sentences laid end to end across documents, with [SEP] between
    two documents (`bertedu.data.packing.pack_full_sentences`, max_seq_length - 2 tokens).
    One segment (token types all 0), no sentence pair: `next_sentence_label` is IS_NEXT
    and means nothing (train MLM only). Separators count as special tokens, so they are
    never masked. `documents` as for `create_pretraining_examples`; word ids are kept when
    the sentences carry word boundaries (for whole-word masking). `doc_a` / `doc_b` are the
    first and last document a block draws on, `span_a` its length, `span_b` empty.
    """
    from .packing import SEPARATOR, pack_full_sentences

    if max_seq_length < 3:
        raise ValueError(f"max_seq_length={max_seq_length} leaves no room: [CLS] block [SEP] needs at least 3.")
    docs, cls_id, sep_id = _prepare_documents(documents, vocab, cls_token_id, sep_token_id)
    if not docs:
        raise ValueError("No tokens in any document: the corpus is empty (or every sentence is).")
    # Pack positions into the documents' token arrays rather than ids, so that each
    # packed token can be traced back to its id and its word boundary.
    offsets = list(itertools.accumulate([len(d.ids) for d in docs], initial=0))
    by_position = [[list(range(offsets[k] + d.starts[s], offsets[k] + d.starts[s + 1])) for s in range(d.n_sentences)]
                   for k, d in enumerate(docs)]
    flat_ids = [i for d in docs for i in d.ids]
    has_words = all(d.word_starts is not None for d in docs)
    flat_starts = [w for d in docs for w in d.word_starts] if has_words else None
    examples = []
    for block in pack_full_sentences(by_position, max_seq_length - 2, separator_id=-1):
        ids = [sep_id if k == -1 else flat_ids[k] for k in block.input_ids]
        special = [1] + [int(k == -1) for k in block.input_ids] + [1]
        word_ids = None
        if has_words:
            word_ids, word = [-1], -1
            for j, k in enumerate(block.input_ids):
                if k == -1:
                    word_ids.append(-1)
                    continue
                if flat_starts[k] or j == 0 or block.input_ids[j - 1] == -1:
                    word += 1
                word_ids.append(word)
            word_ids.append(-1)
        sources = [docs[d].index for d in block.doc_ids if d != SEPARATOR]
        examples.append(PretrainingExample(
            input_ids=[cls_id, *ids, sep_id], token_type_ids=[0] * (len(ids) + 2), special_tokens_mask=special,
            next_sentence_label=IS_NEXT, word_ids=word_ids, doc_a=sources[0], doc_b=sources[-1],
            span_a=(0, len(ids)), span_b=(0, 0)))
    return examples


def _examples_from_document(d, docs, max_tokens, short_seq_prob, nsp_prob, rng, cls_id, sep_id):
    doc = docs[d]
    examples = []
    target = _target_length(max_tokens, short_seq_prob, rng)
    chunk_start, i = 0, 0  # the chunk is sentences chunk_start..i of this document
    while i < doc.n_sentences:
        chunk_tokens = doc.starts[i + 1] - doc.starts[chunk_start]
        if i < doc.n_sentences - 1 and chunk_tokens < target:
            i += 1  # keep packing sentences into the chunk
            continue
        n_chunk = i - chunk_start + 1
        is_random_next = rng.random() < nsp_prob
        if n_chunk >= 2:
            # A is the first a_sentences of the chunk (at least one, leaving one for B).
            a_sentences = rng.randint(1, n_chunk - 1)
            a = (doc.starts[chunk_start], doc.starts[chunk_start + a_sentences])
            b = (a[1], doc.starts[i + 1])
        else:
            start, end = doc.starts[i], doc.starts[i + 1]
            a_sentences = 1
            if is_random_next or end - start < 2:
                is_random_next = True  # a one-token chunk cannot be split into A and B
                a, b = (start, end), (end, end)
            else:
                # One long sentence: A and B are its two halves, cut at a random token.
                cut = rng.randint(start + 1, end - 1)
                a, b = (start, cut), (cut, end)

        doc_b = doc
        if is_random_next:
            # NotNext: B is a span of another document, as long as the chunk had room for.
            other = rng.randrange(len(docs) - 1)
            doc_b = docs[other + (other >= d)]  # any document but this one
            target_b = target - (a[1] - a[0])
            first = last = rng.randrange(doc_b.n_sentences)
            while last < doc_b.n_sentences - 1 and doc_b.starts[last + 1] - doc_b.starts[first] < target_b:
                last += 1
            b = (doc_b.starts[first], doc_b.starts[last + 1])
            # The chunk's sentences after A were not used: put them back for the next chunk.
            i = chunk_start + a_sentences - 1

        a, b = _truncate_pair(a, b, max_tokens, rng)
        examples.append(_make_example(doc, a, doc_b, b, is_random_next, cls_id, sep_id))
        chunk_start = i = i + 1
        target = _target_length(max_tokens, short_seq_prob, rng)
    return examples


def _target_length(max_tokens: int, short_seq_prob: float, rng: random.Random) -> int:
    # Usually fill the whole sequence (padding is wasted compute); sometimes (short_seq_prob)
    # aim shorter, so that pretraining also sees the short inputs of fine-tuning.
    if rng.random() < short_seq_prob:
        return rng.randint(2, max_tokens)
    return max_tokens


def _truncate_pair(a, b, max_tokens: int, rng: random.Random):
    """Shorten the longer of the token ranges a, b by one token at a time until both fit."""
    (a0, a1), (b0, b1) = a, b
    while (a1 - a0) + (b1 - b0) > max_tokens:
        front = rng.random() < 0.5  # cut the front or the back, at random, to avoid a bias
        if a1 - a0 > b1 - b0:
            a0, a1 = (a0 + 1, a1) if front else (a0, a1 - 1)
        else:
            b0, b1 = (b0 + 1, b1) if front else (b0, b1 - 1)
    return (a0, a1), (b0, b1)


def _make_example(doc_a: _Document, a, doc_b: _Document, b, is_random_next: bool, cls_id: int, sep_id: int):
    tokens_a, tokens_b = doc_a.ids[a[0] : a[1]], doc_b.ids[b[0] : b[1]]
    n_a, n_b = len(tokens_a), len(tokens_b)
    input_ids = [cls_id, *tokens_a, sep_id, *tokens_b, sep_id]  # [CLS] A [SEP] B [SEP]
    token_type_ids = [0] * (n_a + 2) + [1] * (n_b + 1)  # segment A: [CLS] A [SEP]; B: B [SEP]
    special_tokens_mask = [1] + [0] * n_a + [1] + [0] * n_b + [1]
    word_ids = None
    if doc_a.word_starts is not None and doc_b.word_starts is not None:
        word_ids, word = [-1], -1
        for source, (start, end) in ((doc_a, a), (doc_b, b)):
            for j in range(start, end):
                # A segment's first token starts a word even if truncation cut that word.
                if source.word_starts[j] or j == start:
                    word += 1
                word_ids.append(word)
            word_ids.append(-1)  # the [SEP] after the segment
    return PretrainingExample(
        input_ids=input_ids,
        token_type_ids=token_type_ids,
        special_tokens_mask=special_tokens_mask,
        next_sentence_label=NOT_NEXT if is_random_next else IS_NEXT,
        word_ids=word_ids,
        doc_a=doc_a.index,
        doc_b=doc_b.index,
        span_a=tuple(a),
        span_b=tuple(b),
    )


def _prepare_documents(documents, vocab, cls_token_id, sep_token_id):
    """Documents -> `_Document`s with ids; also the [CLS] and [SEP] ids to use."""
    if isinstance(documents, (str, bytes)) or not isinstance(documents, Sequence):
        raise TypeError("documents must be a list of documents, each a list of tokenised sentences.")
    if vocab is not None and not isinstance(vocab, Mapping):
        vocab = getattr(vocab, "vocab", None)  # a tokenizer
        if not isinstance(vocab, Mapping):
            raise TypeError("vocab must be a token -> id mapping or a bertedu tokenizer.")
    unk_id = vocab.get("[UNK]") if vocab is not None else None
    docs, saw_str, has_words = [], False, True
    for index, document in enumerate(documents):
        if isinstance(document, str):
            raise TypeError(
                f"Document {index} is a string. Each document must be a list of tokenised "
                "sentences; build_pretraining_dataset() tokenises text for you."
            )
        ids, starts, word_starts = [], [0], []
        for sentence in document:
            tokens, words = _split_sentence(sentence, index)
            if not tokens:
                continue
            if isinstance(tokens[0], str):
                saw_str = True
                if vocab is None:
                    raise ValueError(
                        "The sentences are WordPiece tokens (str): pass vocab=tokenizer (or its "
                        "token -> id dict) to turn them into ids."
                    )
                ids += [vocab.get(t, unk_id) for t in tokens]
                if words is None:
                    # A piece beginning with ## continues the word before it.
                    words = [not t.startswith("##") or j == 0 for j, t in enumerate(tokens)]
            else:
                ids += [int(t) for t in tokens]
            if words is None:
                has_words = False
            else:
                word_starts += words
            starts.append(len(ids))
        if len(starts) > 1:
            docs.append(_Document(index, ids, starts, word_starts))
    if not has_words:
        for doc in docs:
            doc.word_starts = None
    if saw_str:
        cls_token_id = vocab["[CLS]"] if cls_token_id is None else cls_token_id
        sep_token_id = vocab["[SEP]"] if sep_token_id is None else sep_token_id
    if cls_token_id is None or sep_token_id is None:
        raise ValueError(
            "The sentences are token ids: pass cls_token_id and sep_token_id (tokenizer.cls_token_id "
            "and tokenizer.sep_token_id; 101 and 102 in the uncased vocabulary), or vocab=tokenizer."
        )
    return docs, cls_token_id, sep_token_id


def _split_sentence(sentence, doc_index: int):
    """A sentence -> (tokens, word_starts or None)."""
    if isinstance(sentence, str):
        raise TypeError(
            f"Document {doc_index} has a sentence that is a string ({sentence[:40]!r}); sentences "
            "must be lists of tokens. build_pretraining_dataset() tokenises text for you."
        )
    if isinstance(sentence, torch.Tensor):
        return sentence.tolist(), None
    if (
        isinstance(sentence, tuple)
        and len(sentence) == 2
        and all(isinstance(part, (list, tuple)) for part in sentence)
    ):
        tokens, word_ids = list(sentence[0]), list(sentence[1])
        if len(tokens) != len(word_ids):
            raise ValueError(
                f"Document {doc_index}: a (tokens, word_ids) sentence has {len(tokens)} tokens "
                f"but {len(word_ids)} word ids; give one word id per token."
            )
        # A token starts a word when its word id differs from the one before it.
        return tokens, [j == 0 or word_ids[j] != word_ids[j - 1] for j in range(len(tokens))]
    return list(sentence), None


# ----------------------------------------------------------------------------------------
# The data set: masking, static or dynamic
# ----------------------------------------------------------------------------------------


def example_generator(seed: int, epoch: int, index: int) -> torch.Generator:
    """The torch.Generator that masks sample `index` in `epoch` (CPU), seeded from all three.

    The seed is a hash of (seed, epoch, index), so the mask of a sample depends on nothing
    else: not on the batch, the worker process, the GPU count or what came before. That is
    what makes an interrupted and resumed run reproduce the uninterrupted one exactly.
    """
    digest = hashlib.blake2b(f"bertedu-mask:{seed}:{epoch}:{index}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little"))


class PretrainingDataset(torch.utils.data.Dataset):
    """NSP pairs masked for MLM. `dataset[i]` is a dict of LongTensors (T,) for one sample.

    Introduced in the pretraining-data notebook.

    masking="dynamic" (default, RoBERTa): a fresh mask each time a sample is seen. The mask
        of sample `index` is drawn with `example_generator(seed, epoch, index)`, so it is
        fixed by (seed, epoch, index) alone: call `dataset.set_epoch(epoch)` at the start
        of every epoch (before creating the DataLoader iterator; do not use
        `persistent_workers=True`, whose worker copies would keep the old epoch), and the
        same sample gets a different mask each epoch but the same mask on every run.
    masking="static" (the original BERT): every sample's mask is fixed once and for all
        when the data set is built, as if written to disk. `dupe_factor` copies of every
        pair each get their own mask (the original used 10); the data set has
        `dupe_factor * len(examples)` samples, copy c of pair i at index
        `c * len(examples) + i`. Copy c is drawn with `example_generator(seed, c, i)`: it
        is exactly the mask that dynamic masking would draw for pair i in epoch c, frozen.
        (It is recomputed on access rather than stored: the same mask, without holding
        `dupe_factor` copies of the corpus in memory.) `set_epoch` changes nothing.

    Masking costs about 0.2 ms per sample on one CPU core: at GPU speeds use
    `DataLoader(..., num_workers=4)` or so.

    Each sample: {"input_ids" (masked), "token_type_ids", "labels" (-100 where not
    selected), "next_sentence_label" (0-d)}. Batch with `dataset.collate`:

        loader = DataLoader(dataset, batch_size=32, shuffle=True, collate_fn=dataset.collate)

    Resuming exactly, mid-epoch: masks depend on (seed, epoch, index) only, so it is
    enough that the sample order is reproducible too, e.g.

        for epoch in range(start_epoch, epochs):
            dataset.set_epoch(epoch)
            order = torch.randperm(len(dataset), generator=torch.Generator().manual_seed(seed + epoch))
            sampler = order[batches_done * batch_size:].tolist()   # skip what was trained on
            loader = DataLoader(dataset, batch_size=batch_size, sampler=sampler, collate_fn=dataset.collate)

    Under DDP the same holds with a `DistributedSampler` (call its `set_epoch` as well):
    each process masks its share of the indices exactly as one process would.

    Args:
        examples: `PretrainingExample`s from `create_pretraining_examples`, or an
            `ExampleStore` (bertedu.data.stream: examples on disk, read memory-mapped).
        mask_token_id, vocab_size, pad_token_id: from the tokenizer.
        special_ids: ids never drawn as random replacements (pass `tokenizer.special_ids`).
        whole_word: mask whole words (needs examples with word ids).
        mlm_probability, selection, max_predictions_per_seq, per_word_decision: passed to
            `mask_tokens`.
        seed: the masking seed.
    """

    def __init__(
        self,
        examples: Sequence[PretrainingExample],
        *,
        mask_token_id: int,
        vocab_size: int,
        pad_token_id: int = 0,
        special_ids: Sequence[int] | None = None,
        masking: str = "dynamic",
        dupe_factor: int = 1,
        whole_word: bool = False,
        mlm_probability: float = 0.15,
        selection: str = "bernoulli",
        max_predictions_per_seq: int | None = None,
        per_word_decision: bool = True,
        seed: int = 0,
    ):
        if masking not in MASKINGS:
            raise ValueError(f"masking must be one of {MASKINGS}, got {masking!r}.")
        if selection not in SELECTIONS:
            raise ValueError(f"selection must be one of {SELECTIONS}, got {selection!r}.")
        if dupe_factor < 1:
            raise ValueError(f"dupe_factor must be at least 1, got {dupe_factor}.")
        if dupe_factor > 1 and masking == "dynamic":
            raise ValueError(
                "dupe_factor copies each pair with a different fixed mask: it belongs to "
                "masking='static'. Dynamic masking draws a new mask every epoch anyway."
            )
        if not examples:
            raise ValueError("No examples: create_pretraining_examples() returned none for this corpus.")
        has_words = getattr(examples, "has_word_ids", None)
        if has_words is None:
            has_words = all(e.word_ids is not None for e in examples)
        if whole_word and not has_words:
            raise ValueError(
                "whole_word=True needs word boundaries, but these examples were made from token "
                "ids. Make them from WordPiece tokens (str) or (tokens, word_ids) sentences."
            )
        # A disk-backed ExampleStore (bertedu.data.stream) stays on disk; a list is copied.
        self.examples = examples if hasattr(examples, "has_word_ids") else list(examples)
        self.masking = masking
        self.dupe_factor = dupe_factor
        self.whole_word = whole_word
        self.pad_token_id = pad_token_id
        self.seed = seed
        self.epoch = 0
        self.mask_kwargs = dict(
            mask_token_id=mask_token_id,
            vocab_size=vocab_size,
            special_ids=None if special_ids is None else sorted(special_ids),
            mlm_probability=mlm_probability,
            selection=selection,
            max_predictions_per_seq=max_predictions_per_seq,
            per_word_decision=per_word_decision,
        )

    def __len__(self) -> int:
        return self.dupe_factor * len(self.examples)

    def set_epoch(self, epoch: int) -> None:
        """Select the masks of `epoch` (dynamic masking). Call at the start of each epoch."""
        self.epoch = int(epoch)

    def __getitem__(self, index: int) -> dict[str, torch.Tensor]:
        if not -len(self) <= index < len(self):
            raise IndexError(f"index {index} is out of range for a data set of {len(self)} samples.")
        index %= len(self)
        if self.masking == "static":
            # Copy c of pair i: its mask was fixed at build time by (seed, c, i), whatever the epoch.
            copy, pair = divmod(index, len(self.examples))
            return self.masked(pair, epoch=copy)
        # Dynamic: a fresh mask for every epoch, fixed by (seed, epoch, index).
        return self.masked(index, self.epoch)

    def masked(self, index: int, epoch: int) -> dict[str, torch.Tensor]:
        """Pair `index` masked with `example_generator(seed, epoch, index)`."""
        example = self.examples[index]
        input_ids = torch.tensor(example.input_ids, dtype=torch.long)  # (T,)
        masked, labels = mask_tokens(
            input_ids,
            torch.tensor(example.special_tokens_mask, dtype=torch.bool),  # (T,)
            generator=example_generator(self.seed, epoch, index),
            word_ids=torch.tensor(example.word_ids, dtype=torch.long) if self.whole_word else None,
            **self.mask_kwargs,
        )
        return {
            "input_ids": masked,  # (T,)
            "token_type_ids": torch.tensor(example.token_type_ids, dtype=torch.long),  # (T,)
            "labels": labels,  # (T,)
            "next_sentence_label": torch.tensor(example.next_sentence_label, dtype=torch.long),  # ()
        }

    def collate(self, samples: Sequence[dict]) -> dict[str, torch.Tensor]:
        """`collate_pretraining` with this data set's padding id: the DataLoader's collate_fn."""
        return collate_pretraining(samples, pad_token_id=self.pad_token_id)

    def masked_batch(self, indices: Sequence[int]) -> dict[str, torch.Tensor]:
        """The pairs `indices` padded into a batch, then masked in one `mask_tokens` call.

        The fast alternative to `collate([dataset[i] for i in indices])` (about 4 times
        the real tokens per CPU-second at 128: benchmarks/data_path.py). Its masks are
        drawn with `batch_generator(seed, epoch, indices)`: the same batch of the same
        run gets the same masks, but they differ from the per-example path's, which
        stays the default (dynamic masking only: static copies are per example).
        """
        if self.masking != "dynamic":
            raise ValueError("masked_batch draws dynamic masks; static masking is per example (dataset[i])")
        examples = [self.examples[i] for i in indices]
        kwargs = {k: v for k, v in self.mask_kwargs.items() if v is not None}
        return collate_pretraining(examples, pad_token_id=self.pad_token_id, whole_word=self.whole_word,
                                   generator=batch_generator(self.seed, self.epoch, indices), **kwargs)


class UnmaskedPairs(torch.utils.data.Dataset):
    """The pairs of a dynamic-masking `PretrainingDataset`, unmasked, and a `collate` that pads
    a micro-batch and masks it in one `mask_tokens` call, from the generator it is given.

    How `bertedu pretrain --batch-masking` feeds the training loop: the loop seeds one
    generator per micro-batch from (seed, step, slot), so the masks are a pure function of
    those, as reproducible and as resumable as the per-example masks of `dataset[i]` (but
    other masks). At 128 tokens it makes about 4 times the real tokens per CPU-second
    (benchmarks/data_path.py), what a GPU needs from the DataLoader's workers.
    """

    def __init__(self, dataset: PretrainingDataset):
        if dataset.masking != "dynamic":
            raise ValueError("batch masking draws dynamic masks; static masking is per example (dataset[i])")
        self.examples, self.pad_token_id, self.whole_word = dataset.examples, dataset.pad_token_id, dataset.whole_word
        self.mask_kwargs = {k: v for k, v in dataset.mask_kwargs.items() if v is not None}

    def __len__(self) -> int:
        return len(self.examples)

    def __getitem__(self, index: int):
        return self.examples[index]

    def collate(self, examples: Sequence, generator: torch.Generator) -> dict[str, torch.Tensor]:
        """Pad `examples` (B pairs) and mask the (B, T) batch at once: `collate_pretraining`'s batch."""
        return collate_pretraining(examples, pad_token_id=self.pad_token_id, whole_word=self.whole_word,
                                   generator=generator, **self.mask_kwargs)


def batch_generator(seed: int, epoch: int, indices: Sequence[int]) -> torch.Generator:
    """The torch.Generator that masks a whole batch: seeded from (seed, epoch, its indices)."""
    key = ",".join(str(int(i)) for i in indices)
    digest = hashlib.blake2b(f"bertedu-batch-mask:{seed}:{epoch}:{key}".encode(), digest_size=8).digest()
    return torch.Generator().manual_seed(int.from_bytes(digest, "little"))


# ----------------------------------------------------------------------------------------
# Batches
# ----------------------------------------------------------------------------------------


def collate_pretraining(
    examples: Sequence[dict | PretrainingExample],
    *,
    pad_token_id: int,
    generator: torch.Generator | None = None,
    pad_to_multiple_of: int | None = None,
    whole_word: bool = False,
    **mask_kwargs,
) -> dict[str, torch.Tensor]:
    """Pad samples into a batch: the keyword arguments of `BertForPreTraining.forward`.

    Returns {"input_ids", "token_type_ids", "attention_mask", "labels"} as LongTensors
    (B, T) padded to the longest sample (or up to a multiple of `pad_to_multiple_of`, which
    suits tensor cores), and "next_sentence_label" (B,). Padding gets `pad_token_id`,
    token type 0, attention 0 and label -100.

    Samples from `PretrainingDataset` are already masked. Unmasked `PretrainingExample`s
    are masked here, the whole batch at once (as Hugging Face's collator does), with
    `generator` and `mask_kwargs` (mask_token_id=, vocab_size=, special_ids=, ... of
    `mask_tokens`); `whole_word=True` uses their word ids. Batch-level masks depend on the
    batch: for exactly resumable training prefer `PretrainingDataset`.
    """
    if not examples:
        raise ValueError("collate_pretraining() got an empty list of samples.")
    rows = [_as_sample(e) for e in examples]
    T = max(len(r["input_ids"]) for r in rows)
    if pad_to_multiple_of:
        T = -(-T // pad_to_multiple_of) * pad_to_multiple_of
    lengths = torch.tensor([len(r["input_ids"]) for r in rows])  # (B,)
    batch = {
        "input_ids": pad_rows([r["input_ids"] for r in rows], pad_token_id, T),  # (B, T)
        "token_type_ids": pad_rows([r["token_type_ids"] for r in rows], 0, T),  # (B, T)
        "attention_mask": (torch.arange(T)[None, :] < lengths[:, None]).long(),  # (B, T) 1 = real token
    }
    if all("labels" in r for r in rows):
        batch["labels"] = pad_rows([r["labels"] for r in rows], IGNORE_INDEX, T)  # padding is never predicted
    elif any("labels" in r for r in rows):
        raise ValueError("Some samples are masked (have labels) and some are not: collate one kind at a time.")
    else:
        batch["input_ids"], batch["labels"] = _mask_batch(batch["input_ids"], rows, generator, whole_word, mask_kwargs)
    batch["next_sentence_label"] = torch.tensor([int(r["next_sentence_label"]) for r in rows], dtype=torch.long)  # (B,)
    return batch


def _mask_batch(input_ids: torch.Tensor, rows: list[dict], generator, whole_word: bool, mask_kwargs: dict):
    """Mask a padded batch (B, T) of unmasked samples in one `mask_tokens` call."""
    if "mask_token_id" not in mask_kwargs or "vocab_size" not in mask_kwargs:
        raise ValueError(
            "These samples are not masked yet: pass mask_token_id= and vocab_size= (and "
            "special_ids=) so that the collator masks the batch, or use PretrainingDataset."
        )
    T = input_ids.shape[1]
    special = pad_rows([r["special_tokens_mask"] for r in rows], 1, T).bool()  # (B, T) padding counts as special
    word_ids = None
    if whole_word:
        if any(r.get("word_ids") is None for r in rows):
            raise ValueError("whole_word=True needs samples with word_ids.")
        word_ids = pad_rows([r["word_ids"] for r in rows], -1, T)  # (B, T)
    return mask_tokens(input_ids, special, generator=generator, word_ids=word_ids, **mask_kwargs)


def _as_sample(example) -> dict:
    if isinstance(example, PretrainingExample):
        return {
            "input_ids": example.input_ids,
            "token_type_ids": example.token_type_ids,
            "special_tokens_mask": example.special_tokens_mask,
            "word_ids": example.word_ids,
            "next_sentence_label": example.next_sentence_label,
        }
    if isinstance(example, Mapping):
        return example
    raise TypeError(f"collate_pretraining() takes dicts or PretrainingExamples, got {type(example).__name__}.")


# ----------------------------------------------------------------------------------------
# From text, in one call
# ----------------------------------------------------------------------------------------


def tokenize_document(document: Sequence[str | Sequence[str]], tokenizer, index: int = 0) -> list:
    """A text document -> its sentences as WordPiece tokens (or (tokens, word_ids) pairs).

    A sentence is a string (tokenised with `tokenizer.tokenize`; `##` marks word
    boundaries) or a list of words of the corpus's own segmentation (each word tokenised
    on its own; all its pieces form one word). `index` only names the document in errors.
    """
    if isinstance(document, str):
        raise TypeError(f"Document {index} is a string: a document must be a list of sentences.")
    texts = [s for s in document if isinstance(s, str)]
    # Plain-text sentences are tokenised together (the fast tokenizer batches them).
    pieces = iter(tokenizer.tokenize_batch(texts))
    sentences = []
    for sentence in document:
        if isinstance(sentence, str):
            sentences.append(next(pieces))
        else:  # a list of words from the corpus's own segmentation
            sentences.append(segmented_word_ids(sentence, tokenizer.tokenize))
    return sentences


def tokenize_documents(documents: Sequence[Sequence[str | Sequence[str]]], tokenizer, first_index: int = 0,
                       chunk: int = 8192) -> list:
    """`tokenize_document` for many documents at once: the same sentences, in one batch.

    The plain-text sentences of all the documents go to `tokenizer.tokenize_batch`
    together, `chunk` at a time (the tokenizer's per-sentence encodings live only as long
    as their chunk), so the fast tokenizer spreads them over the CPU's cores instead of one
    small batch per document. `first_index` names the first document in errors.
    """
    for k, document in enumerate(documents):
        if isinstance(document, str):
            raise TypeError(f"Document {first_index + k} is a string: a document must be a list of sentences.")
    texts = [s for document in documents for s in document if isinstance(s, str)]
    pieces = iter([p for a in range(0, len(texts), chunk) for p in tokenizer.tokenize_batch(texts[a:a + chunk])])
    return [[next(pieces) if isinstance(sentence, str) else segmented_word_ids(sentence, tokenizer.tokenize)
             for sentence in document] for document in documents]


def build_pretraining_dataset(
    documents: Sequence[Sequence[str | Sequence[str]]],
    tokenizer,
    max_seq_length: int = 128,
    short_seq_prob: float = 0.1,
    nsp_prob: float = 0.5,
    *,
    masking: str = "dynamic",
    dupe_factor: int = 1,
    whole_word: bool = False,
    mlm_probability: float = 0.15,
    selection: str = "bernoulli",
    max_predictions_per_seq: int | None = None,
    seed: int = 0,
    packing: str = "pairs",
) -> PretrainingDataset:
    """Text documents -> a masked pretraining data set, with a bertedu tokenizer.

    Introduced in the pretraining-data notebook.

    Args:
        documents: a list of documents, each a list of sentences. A sentence is a string
            (English: tokenised with `tokenizer.tokenize`; `##` pieces mark word
            boundaries) or a list of words (a segmented sentence such as People's Daily's:
            every word is tokenised on its own and all its pieces form one word, so
            `whole_word=True` masks Chinese words, not single characters).
        tokenizer: from `bertedu.data.tokenizer.load_vocab_tokenizer`.
        max_seq_length, short_seq_prob, nsp_prob: see `create_pretraining_examples`.
        masking, dupe_factor, whole_word, mlm_probability, selection,
            max_predictions_per_seq: see `PretrainingDataset`.
        seed: seeds both the pairing (a `random.Random(seed)`) and the masks.
        packing: "pairs" (BERT's NSP pairs, `create_pretraining_examples`) or
            "full-sentences" (RoBERTa's one-segment blocks across documents,
            `create_packed_examples`; short_seq_prob and nsp_prob do not apply).

    The pairs are in `dataset.examples`.
    """
    if packing not in PACKINGS:
        raise ValueError(f"packing must be one of {', '.join(PACKINGS)}, got {packing!r}")
    tokenized = tokenize_documents(documents, tokenizer)
    if packing == "full-sentences":
        examples = create_packed_examples(tokenized, max_seq_length, vocab=tokenizer.vocab)
    else:
        examples = create_pretraining_examples(
            tokenized, max_seq_length, short_seq_prob, nsp_prob, random.Random(seed), vocab=tokenizer.vocab
        )
    return PretrainingDataset(
        examples,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size,
        pad_token_id=tokenizer.pad_token_id,
        special_ids=sorted(tokenizer.special_ids),
        masking=masking,
        dupe_factor=dupe_factor,
        whole_word=whole_word,
        mlm_probability=mlm_probability,
        selection=selection,
        max_predictions_per_seq=max_predictions_per_seq,
        seed=seed,
    )
