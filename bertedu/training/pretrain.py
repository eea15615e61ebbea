"""Pretraining end to end: corpus -> vocabulary -> NSP/MLM examples -> BertForPreTraining.

`bertedu pretrain` (bertedu/cli.py) is a thin shell around `pretrain()`; the pretraining
notebook calls it directly. Everything a run makes lands in one output folder:

    out/identity.json         written first: the run's kind, settings and data (bertedu.training.runfolder),
                              which every --resume is checked against before anything is written
    out/vocab.txt             the WordPiece vocabulary the model reads (trained, or copied)
    out/run.json              the settings of the run
    out/checkpoint-<step>/    weights (safetensors), config, optimiser/RNG/data position
    out/metrics.jsonl         training and held-out metrics, one JSON record a line
    out/metrics.png           loss and accuracy curves
    out/examples/             with stream=True: the training pairs on disk (bertedu.data.stream)

The paper's two phases are two commands: 90% of the steps at sequence length 128, then
10% at 512 starting from the first phase's weights (`init_from`), which `--max-seq-length
512` needs anyway to learn the positions beyond 128 (Devlin et al. 2019, appendix A.2).

The minilm-mlm recipe (a real masked LM from all-MiniLM-L6-v2, which ships without an MLM
head; notes/minilm_mlm.md, notebook 06's last section) is a set of options of the same run:

    bertedu pretrain --init-from minilm --packing documents --no-nsp --freeze-word-embeddings \
        --unigram-bias --lr 2e-4 --head-lr 2e-3 --warmup-steps 20 --warmup-offset 1 --steps 400

    --init-from minilm         MiniLM's encoder and pooler, fresh MLM and NSP heads (drawn from --seed),
                               the decoder tied to MiniLM's word embeddings, its vocabulary
    --unigram-bias             the decoder bias starts at the training text's log unigram frequencies
    --freeze-word-embeddings   MiniLM's word embeddings (and so the decoder weight) stay fixed
    --head-lr                  the MLM head's own peak rate (the loop's `peak_lrs`)
    --packing documents        `[CLS] pieces [SEP]` runs of whole documents, masked afresh each batch
                               (`bertedu.data.documents`); measured by `heldout.masked_accuracy`
                               (fp32) on --corpus's held-out documents, split by a fixed seed 0
                               (for wiki-en the 5 every minilm-mlm run is measured on)
    --warmup-offset 1          the first update gets 1/warmup of the peak rate (the recipe's schedule)

Fed the same batches from the same start, this gives the losses, gradients and weights of
`python -m bertedu.training.mlm_adapt train`, the separate pipeline that made minilm-mlm
(tests/test_pretrain_minilm_recipe.py), removed since. What differs is where the random
numbers come from: the loop orders the sequences by its own epoch permutation (a fresh
`torch.randperm` seeded by seed + epoch; the incomplete last batch of an epoch is dropped,
where mlm_adapt shuffled with `random.Random(seed)` and carried the rest into the next
epoch), each micro-batch's masks come from a generator seeded by (seed, step, slot) (mlm_adapt:
one generator seeded seed + 1, drawn batch after batch), and dropout from seed (mlm_adapt:
seed + 2). So the same --seed draws other batches, masks and dropout than the old run did.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import time
import warnings
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .checkpoint import latest_checkpoint, list_checkpoints, load_weights, load_weights_into_new, read_config
from .progress import stage
from ..data.documents import split_documents
from ..data.pretraining import UnmaskedPairs
from ..model.config import PRESETS, BertConfig
from ..model.constants import VOCAB_NAME
from ..errors import MissingFileError, OutputFolderError, SettingError, as_user_error
from ..model.fast import set_fast_path
from ..model.heads import BertForPreTraining
from .distributed import is_main_process
from .jobs import make_out_folder, run_lock
from .runfolder import check_resumable, check_run_folder, remove_outputs, start_run_folder, undone_if_refused
from ..pretrained import (MASKED_LMS, load_masked_lm, masked_lm_dir, masked_lm_or_run_dir, masked_lm_vocab_path,
                          minilm_vocab_path)
from ..data.tokenizer import SPECIAL_TOKENS, ByteLevelBPETokenizer, copy_vocabulary, load_vocab_tokenizer
from .loop import TrainConfig, TrainResult, train
from ..utils import eval_mode, resolve_device, resolve_precision, seed_everything, setting
from .curves import plot_metrics

RUN_NAME = "run.json"
MINILM = "minilm"  # --init-from minilm: the real all-MiniLM-L6-v2 given fresh heads
MINILM_POSITIONS = 512  # all-MiniLM-L6-v2's max_position_embeddings
PACKINGS = ("pairs", "full-sentences", "documents")

# The route's budget recipe (docs/gpu_route.md; issue 52 item 2), after cramming (Geiping &
# Goldstein 2023: no NSP, packed sequences, the schedule spread over a time budget) and
# MosaicBERT (Portes et al. 2023: 30% of the pieces masked). Flags added to a `bertedu pretrain`
# command; the batch, learning rate and budget depend on the scale and are given beside them.
# "flags" is the in-memory form measured against BERT's recipe at equal FLOPs by
# benchmarks/recipe_compare.py; "streamed_flags" the form for a corpus larger than memory
# (--packing documents and full-sentences are built in memory and --stream builds sentence
# pairs, so the streamed form trains pairs MLM-only, and --unigram-bias, which needs
# --packing documents, goes).
BUDGET_RECIPE = {
    "mlm_probability": 0.30,
    "flags": ("--packing", "documents", "--no-nsp", "--mlm-probability", "0.3", "--unigram-bias"),
    "streamed_flags": ("--stream", "--no-nsp", "--mlm-probability", "0.3"),
}


@dataclass(frozen=True)
class PretrainConfig(TrainConfig):
    """The settings of one pretraining run; each field is a `bertedu pretrain` flag.

    A `TrainConfig` (the loop's optimiser, budget, batches, hardware and bookkeeping, with
    the defaults below for small models) plus what pretraining adds: the corpus, the
    vocabulary, how examples are built and masked, the model.
    """

    preset: str = setting("mini", f"model size: {', '.join(PRESETS)}")
    corpus: str = setting("wiki-en", "wiki-en (embedded English Wikipedia), bible-en[:kjv|web|asv|ylt], "
                                     "peoples-daily-zh (embedded People's Daily 1998), wordnet-en (WordNet's "
                                     "definitions), a file in BERT format (one sentence per line, blank line between "
                                     "documents), a folder of .txt files, or hf:NAME[:CONFIG] (Hugging Face "
                                     "datasets; needs a network)")
    extra_corpus: Optional[str] = setting(None, "more text to train on: corpus names as for --corpus, separated by "
                                                "commas (e.g. bible-en:web,bible-en:kjv); all their documents are "
                                                "training documents, the held-out documents still come from "
                                                "--corpus alone, so runs with and without it are measured alike")
    max_seq_length: int = setting(128, "tokens per example, [CLS] A [SEP] B [SEP] included; the paper uses 128, "
                                       "then 512 for the last 10%% of steps (see --init-from)")
    # vocabulary
    vocab: Optional[str] = setting(None, "vocab.txt to use; 'minilm' for bert-base-uncased's 30,522 pieces; "
                                         "default: train one on the corpus (WordPiece for English, one token "
                                         "per character for Chinese)")
    vocab_size: int = setting(8000, "size of the vocabulary trained on the corpus (WordPiece or byte-level BPE)")
    vocab_kind: str = setting("wordpiece", "the kind of vocabulary to train when --vocab is not given: wordpiece "
                                           "(BERT's) or bpe (RoBERTa's byte-level BPE: cased, no [UNK]; vocab.txt and "
                                           "merges.txt). A --vocab with a merges.txt beside it is read as BPE")
    # examples and masking
    masking: str = setting("dynamic", "dynamic: a fresh MLM mask every epoch (RoBERTa); static: masks fixed when "
                                      "the data set is built, dupe_factor copies (original BERT)")
    dupe_factor: int = setting(1, "with static masking, copies of each example, each masked differently")
    packing: str = setting("pairs", "pairs: BERT's [CLS] A [SEP] B [SEP] sentence pairs (for NSP); full-sentences: "
                                    "RoBERTa's FULL-SENTENCES, one segment of whole sentences laid end to end across "
                                    "documents with [SEP] between documents (MLM only: pass --no-nsp). RoBERTa's "
                                    "objective is --packing full-sentences --no-nsp --masking dynamic; documents: "
                                    "each document's pieces cut into [CLS] pieces [SEP] runs that never cross a "
                                    "document, masked afresh each batch (MLM only: --no-nsp; the minilm-mlm recipe), "
                                    "measured by the held-out masked accuracy of notes/minilm_mlm.md")
    mlm_probability: float = setting(0.15, "share of the training pieces selected for prediction (80/10/10 as at "
                                           "0.15); the held-out masks always select 0.15")
    whole_word: bool = setting(False, "mask whole words (all their WordPiece pieces; for Chinese, all "
                                      "characters of a word of the corpus's own segmentation)")
    batch_masking: Optional[bool] = setting(None, "mask each micro-batch in one call in the collate instead of pair "
                                                  "by pair (about 4 times the real tokens per CPU-second at 128: "
                                                  "benchmarks/data_path.py; other masks, as reproducible), with "
                                                  "--masking dynamic (--packing documents always masks by batch); "
                                                  "None: on CUDA only, so CPU runs keep their per-example masks")
    short_seq_prob: float = setting(0.1, "probability of a shorter target length, so the model also sees "
                                         "short inputs")
    max_documents: Optional[int] = setting(None, "read only the first N documents of the corpus")
    stream: bool = setting(False, "for corpora larger than memory: write the examples to OUT/examples/ shard by "
                                  "shard (one shard of documents in memory at a time) and train from them "
                                  "memory-mapped; held-out documents are chosen by a hash of their position")
    shard_documents: int = setting(10_000, "with --stream, documents per shard; NotNext segments come from "
                                           "the same shard")
    eval_documents: float = setting(0.05, "fraction of documents held out to measure MLM and NSP accuracy")
    max_eval_examples: int = setting(512, "held-out examples evaluated")
    nsp: bool = setting(True, "train next sentence prediction beside the MLM; --no-nsp: MLM only, as RoBERTa "
                              "(the examples are still sentence pairs, only the NSP label and loss go)")
    # model
    init_from: Optional[str] = setting(None, "a previous run's folder to start from (phase 2 at "
                                             "--max-seq-length 512); its vocab.txt is reused. Or a masked LM "
                                             f"shipped with the course ({', '.join(MASKED_LMS)}): its vocabulary "
                                             "and its architecture (--preset unused). Or minilm: the real "
                                             "all-MiniLM-L6-v2 (no MLM head of its own) with fresh heads, the "
                                             "decoder tied to its word embeddings; its vocabulary")
    # a pretrained encoder given a fresh MLM head (the minilm-mlm recipe)
    head_lr: Optional[float] = setting(None, "peak learning rate of the MLM head (mlm.*), when it should differ "
                                             "from --lr's: a fresh head on a pretrained encoder learns faster than "
                                             "the encoder (needs --init-from)")
    freeze_word_embeddings: bool = setting(False, "keep the word embeddings, and so the tied MLM decoder, fixed "
                                                  "(with --init-from minilm: MiniLM's own, which then need not ship)")
    unigram_bias: bool = setting(False, "start the fresh MLM decoder bias at the training text's log unigram "
                                        "frequencies, so the first steps need not learn which pieces are frequent "
                                        "(needs --packing documents, and a fresh head: from random weights or "
                                        "--init-from minilm)")
    attn_implementation: str = setting("sdpa", "attention kernel: sdpa (fused) or reference (written out)")
    pad_vocab_to_multiple_of: Optional[int] = setting(None, "give the word-embedding table and MLM decoder a row "
                                                            "count that is a multiple of N (64 on a CUDA GPU: "
                                                            "faster matrix products); the extra rows are never "
                                                            "input or predicted")
    # the fast path (bertedu.model.fast): same loss and gradients, less work
    unpad: bool = setting(True, "fast path: only real tokens go through the dense layers, attention stays "
                                "within each sequence (same loss and gradients; --no-unpad for the readable path)")
    sparse_mlm: bool = setting(True, "fast path: the MLM head runs only on the masked positions (same loss and "
                                     "gradients; --no-sparse-mlm for the readable path)")
    # the loop's settings, with pretraining's defaults
    out: str = setting("runs/pretrain", "output folder: vocab.txt, checkpoint-<step>/, metrics.jsonl, metrics.png")
    overwrite: bool = setting(False, "replace the pretraining run in --out: its checkpoints, vocabulary, run.json "
                                     "and metrics are deleted first, once every other check has passed (a run of "
                                     "another kind is refused)")
    lr: float = setting(5e-4, "peak learning rate of AdamW (small models take a larger rate than BERT-BASE's 1e-4)")
    warmup_ratio: Optional[float] = setting(0.06, "fraction of the run spent warming the learning rate up "
                                                  "linearly, before its linear decay to 0")
    precision: str = setting("auto", "auto (bf16 autocast on CUDA, fp32 on CPU), fp32 or bf16")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.masking not in ("static", "dynamic"):
            raise ValueError(f"masking must be 'static' or 'dynamic', got {self.masking!r}")
        if not 0 < self.eval_documents < 0.5:
            raise ValueError(f"eval_documents is a fraction of the documents in (0, 0.5), got {self.eval_documents}")
        if self.vocab_kind not in ("wordpiece", "bpe"):
            raise ValueError(f"vocab_kind must be 'wordpiece' or 'bpe', got {self.vocab_kind!r}")
        if self.vocab_kind == "bpe" and self.vocab is not None:
            raise ValueError("vocab_kind chooses the vocabulary to train, and vocab names one already made: pass "
                             "one of them (a vocab.txt with a merges.txt beside it is read as byte-level BPE)")
        for name in ("max_documents", "max_eval_examples"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.vocab_size < 1:
            raise ValueError(f"--vocab-size {self.vocab_size}: give a number of pieces, at least 1 (BERT: 30,522)")
        if self.vocab_kind == "bpe" and self.vocab_size < len(SPECIAL_TOKENS) + 256:
            raise ValueError(f"--vocab-size {self.vocab_size}: a byte-level BPE vocabulary holds at least the "
                             f"{len(SPECIAL_TOKENS)} special tokens and 256 bytes: use --vocab-size "
                             f"{len(SPECIAL_TOKENS) + 256} or more (RoBERTa: 50,265)")
        if self.vocab_kind == "bpe" and self.whole_word:
            raise ValueError("whole_word finds words by WordPiece's ## marks; a byte-level BPE vocabulary has none. "
                             "Drop one of them (RoBERTa masks pieces, not whole words)")
        if self.batch_masking and self.masking == "static":
            raise ValueError("batch masking draws a fresh mask every batch; --masking static fixes them per example "
                             "ahead: drop --batch-masking or use --masking dynamic")
        if self.packing not in PACKINGS:
            raise ValueError(f"packing must be one of {', '.join(PACKINGS)}, got {self.packing!r}")
        if self.packing != "pairs" and self.nsp:
            roberta = " (RoBERTa's objective is MLM only)" if self.packing == "full-sentences" else ""
            raise ValueError(f"packing {self.packing} makes no sentence pairs, so there is no NSP to train: "
                             f"add --no-nsp{roberta}")
        if self.packing != "pairs" and self.stream:
            raise ValueError(f"packing {self.packing} is built in memory: it does not combine with stream")
        self._check_documents_recipe()
        self._check_vocab_padding()
        if self.extra_corpus is not None and self.stream:
            raise ValueError("extra_corpus reads its documents into memory: it does not combine with stream")
        model = MINILM if self.init_from == MINILM else self.preset  # MiniLM's own architecture, not --preset's
        positions = MINILM_POSITIONS if model == MINILM else BertConfig.preset(self.preset).max_position_embeddings
        if self.max_seq_length > positions:  # an unknown preset failed just above, too
            raise ValueError(f"max_seq_length {self.max_seq_length} is above the {model} model's {positions} "
                             f"positions: use --max-seq-length {positions} or less")
        least = 5 if self.packing == "pairs" else 3  # [CLS] A [SEP] B [SEP], or [CLS] block [SEP]
        if self.max_seq_length < least:
            raise ValueError(f"max_seq_length {self.max_seq_length} leaves no room for text in a sequence: "
                             f"use --max-seq-length {least} or more (BERT: 128, then 512)")

    def _check_documents_recipe(self) -> None:
        """The options of the minilm-mlm recipe, each where it means something."""
        if not 0.0 < self.mlm_probability < 1.0:
            raise ValueError(f"--mlm-probability {self.mlm_probability}: the share of pieces to predict lies "
                             "between 0 and 1 (BERT: 0.15)")
        if self.packing == "documents" and self.masking == "static":
            raise ValueError("--packing documents masks each batch as it is drawn: drop --masking static")
        if self.packing == "documents" and self.whole_word and self.corpus == "peoples-daily-zh":
            raise ValueError("--packing documents finds whole words by WordPiece's ## marks; for Chinese whole "
                             "words use --packing pairs")
        if self.head_lr is not None and not self.init_from:
            raise ValueError("--head-lr gives the MLM head its own rate on a pretrained encoder: it needs "
                             "--init-from (minilm, a shipped masked LM or a run); from random weights drop --head-lr")
        if self.head_lr is not None and not self.head_lr > 0:
            raise ValueError(f"--head-lr must be positive, got {self.head_lr}")
        if self.unigram_bias and self.packing != "documents":
            raise ValueError("--unigram-bias counts the pieces of --packing documents' sequences: add --packing "
                             "documents, or drop --unigram-bias")
        if self.unigram_bias and self.init_from not in (None, MINILM):
            raise ValueError(f"--unigram-bias starts a fresh decoder bias, but --init-from {self.init_from} brings "
                             "a trained one: drop --unigram-bias (or start from --init-from minilm)")

    def _check_vocab_padding(self) -> None:
        """--pad-vocab-to-multiple-of: a whole number, for a model built here (not a shipped one)."""
        multiple = self.pad_vocab_to_multiple_of
        if multiple is None:
            return
        if isinstance(multiple, bool) or not isinstance(multiple, int) or multiple < 1:
            raise ValueError(f"--pad-vocab-to-multiple-of {multiple}: give a whole number of at least 1 (64 on a "
                             "GPU), or leave the flag out for no padding")
        if self.init_from in (MINILM, *MASKED_LMS):
            raise ValueError(f"--pad-vocab-to-multiple-of pads a model built from --preset (or a run made with it); "
                             f"--init-from {self.init_from} brings its own unpadded table: drop the flag")


def prepare_vocab(cfg: PretrainConfig, corpus, out: Path) -> Path:
    """out/vocab.txt (and merges.txt for byte-level BPE): kept if it exists (a resumed run),
    else copied or trained."""
    from ..data.vocab import build_bpe_vocab, build_char_vocab, build_vocab

    path = out / VOCAB_NAME
    if path.exists():
        return path
    if not is_main_process():
        # Under torchrun only process 0 trains the vocabulary (training is not
        # deterministic in tie order, so each process must read the same file); the
        # others wait for it. write_vocab renames a finished file into place.
        _wait_for(path)
        return path
    if cfg.init_from in MASKED_LMS:  # a shipped masked LM reads its own vocabulary
        copy_vocabulary(masked_lm_vocab_path(cfg.init_from), path)
    elif cfg.init_from == MINILM or cfg.vocab == "minilm":
        copy_vocabulary(minilm_vocab_path(), path)
    elif cfg.init_from:  # phase 2 reads text exactly as phase 1 did
        copy_vocabulary(Path(cfg.init_from) / VOCAB_NAME, path)
    elif cfg.vocab:
        copy_vocabulary(Path(cfg.vocab), path)
    elif corpus.lang == "zh" and cfg.vocab_kind != "bpe":
        build_char_vocab(corpus, path, min_count=2, max_documents=cfg.max_documents)
    else:
        build = build_bpe_vocab if cfg.vocab_kind == "bpe" else build_vocab
        build(corpus, cfg.vocab_size, path, max_documents=cfg.max_documents)
        _warn_if_above_size(path, cfg.vocab_size)
    return path


def _warn_if_above_size(path: Path, vocab_size: int) -> None:
    """One warning when the trained vocabulary came out larger than asked: a trainer keeps the special
    tokens and every character of the corpus (byte-level BPE: all 256 bytes) whatever the size."""
    n = sum(1 for line in path.read_text(encoding="utf-8").splitlines() if line)
    if n > vocab_size:
        warnings.warn(f"--vocab-size {vocab_size} is below what the corpus's characters need: the vocabulary has "
                      f"{n} pieces (the special tokens and every character, no longer pieces); ask for more than "
                      f"{n} to learn whole words (BERT: 30,522)", stacklevel=2)


def _wait_for(path: Path, timeout_s: float = 6 * 3600) -> None:
    """Wait until process 0 has renamed `path` into place (other torchrun processes)."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        if time.monotonic() > deadline:
            raise TimeoutError(f"process 0 did not write {path} within {timeout_s / 3600:.0f} hours")
        time.sleep(1.0)


def document_stream(cfg: PretrainConfig, corpus):
    """The documents to pretrain on, read lazily. For Chinese whole-word masking, the
    corpus's own words."""
    import itertools

    if cfg.whole_word and cfg.corpus == "peoples-daily-zh":
        from ..data.corpora import peoples_daily_words

        docs = ([[w for w, _ in sentence] for sentence in doc] for doc in peoples_daily_words())
    else:
        docs = iter(corpus)
    return itertools.islice(docs, cfg.max_documents)


def corpus_documents(cfg: PretrainConfig, corpus) -> list:
    """The documents to pretrain on, as a list (see `document_stream`)."""
    return list(document_stream(cfg, corpus))


def is_held_out(index: int, fraction: float, seed: int) -> bool:
    """Streaming's held-out rule: document `index` is held out with probability `fraction`,
    decided by a hash of (seed, index) alone, so the split needs no look at the corpus."""
    digest = hashlib.blake2b(f"bertedu-heldout:{seed}:{index}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "little") / 2**64 < fraction


def streamed_documents(cfg: PretrainConfig, corpus, held_out: list, max_held_out: int = 2000):
    """Yield the training documents of the stream; put the held-out ones into `held_out`
    (at most `max_held_out` kept: the evaluation needs only `max_eval_examples` pairs)."""
    for index, document in enumerate(document_stream(cfg, corpus)):
        if is_held_out(index, cfg.eval_documents, cfg.seed):
            if len(held_out) < max_held_out:
                held_out.append(document)
        else:
            yield document


def streamed_dataset(cfg: PretrainConfig, corpus, tokenizer, out: Path):
    """Training pairs in out/examples/ (built once, reused on --resume) and the held-out
    documents, for `stream=True`."""
    from ..data import PretrainingDataset
    from ..data.stream import ExampleStore, write_pretraining_examples

    folder = out / "examples"
    held_out: list = []
    documents = streamed_documents(cfg, corpus, held_out)
    if not is_main_process():
        # Under torchrun process 0 writes the store; the others wait for its folder, which
        # is renamed into place only when complete.
        _wait_for(folder / "meta.json")
    if folder.exists():
        for _ in documents:  # the store exists: only collect the held-out documents
            pass
        store = ExampleStore(folder)
        store.check(tokenizer, cfg.max_seq_length)
    else:
        store = write_pretraining_examples(
            documents, tokenizer, folder, cfg.max_seq_length, cfg.short_seq_prob, seed=cfg.seed,
            shard_documents=cfg.shard_documents, progress=cfg.progress,
        )
    if len(held_out) < 2:
        raise ValueError(
            f"only {len(held_out)} document(s) were held out for evaluation: raise --eval-documents "
            "or use a corpus with more documents"
        )
    dataset = PretrainingDataset(
        store, mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size,
        pad_token_id=tokenizer.pad_token_id, special_ids=sorted(tokenizer.special_ids),
        masking=cfg.masking, dupe_factor=cfg.dupe_factor, whole_word=cfg.whole_word, seed=cfg.seed,
        mlm_probability=cfg.mlm_probability,
    )
    return dataset, held_out


def pretrain(cfg: PretrainConfig, resume: bool = False, stop_at_step: Optional[int] = None,
             prepare_only: bool = False) -> TrainResult:
    """Run one pretraining job as `cfg` says (see the module docstring for the folder).

    `stop_at_step` stops (with a checkpoint) after that step while the schedule stays the whole
    run's (`bertedu.training.loop.train`'s; benchmarks/plateau_climb.py uses it).
    `prepare_only` (`--prepare-only`, one process): write the vocabulary and, with --stream, the
    examples (out/examples/), then stop before training (stopped_by "prepare_only"). The same
    settings without it, under torchrun, then train from them: every process reads the store
    instead of waiting while process 0 alone tokenises the corpus.

    The run holds out/.lock throughout (one run per folder, bertedu.training.jobs.run_lock). A
    user's mistake (an --out holding a run, a missing --vocab or --init-from, a --resume with
    other settings or of a folder with nothing to resume, ...) raises a
    bertedu.errors.UserError before anything is written (`bertedu.training.runfolder`).
    """
    if prepare_only and (resume or int(os.environ.get("WORLD_SIZE", "1")) > 1):
        raise SettingError("--prepare-only prepares a new run's data in one process: run it without --resume and "
                           "without torchrun, then the training command without --prepare-only")
    if resume and is_main_process():
        check_resumable(cfg.out, "pretrain")  # a missing folder: said before the lock creates it
    with run_lock(cfg.out), undone_if_refused(cfg.out, RUN_LEFTOVERS) if is_main_process() else nullcontext():
        return _pretrain(cfg, resume, stop_at_step, prepare_only)


# What a start of a run writes before its first checkpoint: removed when a fresh run with other settings finds it.
RUN_LEFTOVERS = (VOCAB_NAME, "merges.txt", RUN_NAME, "metrics.jsonl", "metrics.png", "examples")


def run_identity(cfg: PretrainConfig) -> dict:
    """identity.json of a pretraining run: its settings, the corpora's identity (a file's
    sha256) and that of the vocabulary or run it reads (`bertedu.training.runfolder`)."""
    from .runfolder import job_identity, source_identity, vocab_identity

    data = {"corpus": source_identity(cfg.corpus)}
    for spec in (cfg.extra_corpus or "").split(","):
        if spec.strip():
            data[f"extra_corpus:{spec.strip()}"] = source_identity(spec.strip())
    inputs = {"vocab": vocab_identity(cfg.vocab), "init_from": vocab_identity(cfg.init_from)}
    return job_identity("pretrain", cfg, data, {k: v for k, v in inputs.items() if v})


def _check_inputs(cfg: PretrainConfig, out: Path, resume: bool) -> None:
    """The user's mistakes that can be caught before any work, as UserErrors."""
    from ..data.tokenizer import load_vocab

    if resume and cfg.overwrite:
        raise SettingError("--resume continues the run in --out, --overwrite deletes it: give one of them")
    if cfg.overwrite and cfg.init_from and Path(cfg.init_from).resolve() == out.resolve():
        raise SettingError(f"--init-from {cfg.init_from} is --out: --overwrite would delete the run it starts from")
    if not resume and not cfg.overwrite and latest_checkpoint(out) is not None:
        raise OutputFolderError(f"{out} already holds a run ({latest_checkpoint(out).name}): pass --resume to "
                                "continue it, --overwrite to replace it, or choose another --out")
    if cfg.vocab and cfg.vocab != "minilm" and not (out / VOCAB_NAME).exists():
        with as_user_error(f"--vocab {cfg.vocab}", ValueError, FileNotFoundError):
            load_vocab(cfg.vocab)  # exists, holds [PAD] [UNK] [CLS] [SEP] [MASK], no repeated token
    if cfg.init_from and cfg.init_from not in (*MASKED_LMS, MINILM) and not resume:
        if latest_checkpoint(cfg.init_from) is None:
            raise MissingFileError(f"--init-from {cfg.init_from}: no checkpoint-<step> folder in it; pass a "
                                   "`bertedu pretrain --out` folder that wrote at least one checkpoint, or one of "
                                   f"{', '.join((MINILM, *MASKED_LMS))}")
        if not (Path(cfg.init_from) / VOCAB_NAME).is_file():
            raise MissingFileError(f"--init-from {cfg.init_from}: no {VOCAB_NAME} in it")


def _pretrain(cfg: PretrainConfig, resume: bool, stop_at_step: Optional[int] = None,
              prepare_only: bool = False) -> TrainResult:
    from ..data.corpora import load_corpus
    from .runfolder import record_vocab

    out = make_out_folder(cfg.out)
    identity = run_identity(cfg)
    plan = check_run_folder(out, identity, resume=resume, overwrite=cfg.overwrite) if is_main_process() else None
    _check_inputs(cfg, out, resume)
    with as_user_error("--corpus", ValueError):  # an unknown name or a path that is not there
        corpus = load_corpus(cfg.corpus)
    if plan == "overwrite":  # every check passed: now the old run goes
        remove_outputs(out, [*(p.name for p in list_checkpoints(out)), *RUN_LEFTOVERS])
    if is_main_process():  # under torchrun, one writer (identity.json before any other file)
        start_run_folder(out, identity, plan, leftovers=RUN_LEFTOVERS)
    with stage("vocabulary", cfg.progress):
        tokenizer = load_vocab_tokenizer(prepare_vocab(cfg, corpus, out), impl="fast")
    if is_main_process() and not resume:
        record_vocab(out)
    if cfg.whole_word and isinstance(tokenizer, ByteLevelBPETokenizer):
        raise SettingError("--whole-word finds words by WordPiece's ## marks; the byte-level BPE vocabulary "
                           f"{out / VOCAB_NAME} has none (RoBERTa masks pieces): drop --whole-word")
    if is_main_process():  # under torchrun, one writer
        (out / RUN_NAME).write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n", encoding="utf-8")

    evaluator, eval_dataset = None, None
    with stage(f"tokenising {cfg.corpus} and building the training and held-out sets", cfg.progress) as made:
        if cfg.packing == "documents":  # sequences in memory, masked by the collate, the fixed held-out measure
            dataset, held_out = document_data(cfg, corpus, tokenizer)
            collate = documents_collate(cfg, tokenizer)
            evaluator = held_out_measure(cfg, tokenizer, held_out)
        else:  # examples built (and with static masking masked) ahead
            dataset, eval_dataset = build_datasets(cfg, corpus, tokenizer, out)
            by_batch = uses_batch_masking(cfg)
            if by_batch:  # unmasked pairs; the collate masks each micro-batch at once
                dataset = UnmaskedPairs(dataset)
            collate = examples_collate(cfg, tokenizer, dataset.collate if by_batch else None)
        made["training sequences"] = len(dataset) if hasattr(dataset, "__len__") else "?"
        made["held-out"] = len(held_out) if evaluator is not None else len(eval_dataset)
    if prepare_only:  # the vocabulary and the examples are written; a run with these settings trains from them
        return TrainResult(step=0, loss=None, tokens_seen=0, elapsed_s=0.0, checkpoint=None, stopped_by="prepare_only")
    model = initial_model(cfg, tokenizer, dataset if cfg.unigram_bias else None, resume)

    train_cfg = cfg.train_config(precision=resolve_precision(cfg.precision, cfg.device), out=str(out),
                                 # without NSP its head gets no gradient: frozen under torchrun, told to DDP otherwise
                                 ddp_find_unused_parameters=cfg.ddp_find_unused_parameters or
                                 (not cfg.nsp and not _nsp_frozen(model)))
    peak_lrs = {"mlm.": cfg.head_lr} if cfg.head_lr is not None else None
    result = train(model, dataset, collate, train_cfg, eval_dataset=eval_dataset, resume=resume,
                   peak_lrs=peak_lrs, evaluator=evaluator, stop_at_step=stop_at_step)
    if result.records and is_main_process():
        plot_metrics(result.records, out / "metrics.png")
    return result


def uses_batch_masking(cfg: PretrainConfig) -> bool:
    """Whether the training batches of pairs / full-sentences are masked a micro-batch at once
    (`--batch-masking`; None: on CUDA, where the GPU needs the tokens) rather than pair by pair."""
    if cfg.packing == "documents" or cfg.masking == "static":
        return False  # documents: its own collate masks by batch; static: masks fixed per example
    if cfg.batch_masking is not None:
        return cfg.batch_masking
    return resolve_device(cfg.device).type == "cuda"


def examples_collate(cfg: PretrainConfig, tokenizer, batch_maker=None):
    """collate(examples, generator) for --packing pairs / full-sentences: the examples come
    masked from the data set, fixed by (seed, epoch, index), or unmasked and masked here by
    batch_maker(examples, generator) (`UnmaskedPairs.collate`, --batch-masking) with the
    generator the loop seeds per micro-batch; without NSP the label goes."""
    from ..data import collate_pretraining

    pad = tokenizer.pad_token_id

    def collate(examples, generator):
        batch = batch_maker(examples, generator) if batch_maker else collate_pretraining(examples, pad_token_id=pad)
        if not cfg.nsp:
            del batch["next_sentence_label"]  # no label, no NSP loss: the MLM alone
        return batch

    return collate


def documents_collate(cfg: PretrainConfig, tokenizer):
    """collate(sequences, generator) for --packing documents: pad, then mask
    (--mlm-probability, 80/10/10; whole words with --whole-word), every draw from the
    generator the loop seeds for this micro-batch. One segment, no NSP label."""
    from ..data.documents import make_batch

    def collate(sequences, generator):
        ids, attention_mask, labels = make_batch(sequences, tokenizer, generator, mlm_probability=cfg.mlm_probability,
                                                 whole_words=cfg.whole_word)
        return {"input_ids": ids, "attention_mask": attention_mask, "labels": labels}  # (B, T) each

    return collate


def document_data(cfg: PretrainConfig, corpus, tokenizer) -> tuple[list[list[int]], list]:
    """(training sequences, held-out documents) for --packing documents.

    --corpus's documents are split by --eval-documents with a fixed seed (0, not --seed: for
    wiki-en the 5 documents every minilm-mlm run and `bertedu distill` are measured on);
    --extra-corpus adds training documents, never one of the held-out ones (so listing
    --corpus again there reads its training documents twice as often). Every document
    becomes `[CLS] pieces [SEP]` runs of --max-seq-length (`document_sequences`).
    """
    from ..data.documents import document_sequences

    train_docs, held_out = split_documents(corpus_documents(cfg, corpus), cfg.eval_documents, held_out_seed(cfg))
    held = {tuple(d) for d in held_out}
    train_docs += [d for d in extra_documents(cfg) if tuple(d) not in held]
    return document_sequences(train_docs, tokenizer, cfg.max_seq_length), held_out


def held_out_seed(cfg: PretrainConfig) -> int:
    """The seed a run splits --corpus into training and held-out documents with: its --seed, except
    --packing documents, which holds out the same documents whatever its --seed (`document_data`)."""
    from ..data.documents import HELD_OUT_SEED

    return HELD_OUT_SEED if cfg.packing == "documents" else cfg.seed


def held_out_measure(cfg: PretrainConfig, tokenizer, held_out: list):
    """evaluator(model) for the loop: `heldout.masked_accuracy` on the first
    --max-eval-examples held-out sequences, masks from seed 0, as eval_ numbers."""
    from .heldout import as_eval_record, masked_accuracy

    def evaluator(model) -> dict:
        return as_eval_record(masked_accuracy(model, tokenizer, held_out, seed=0, max_sequences=cfg.max_eval_examples))

    return evaluator


def initial_model(cfg: PretrainConfig, tokenizer, sequences=None, resume: bool = False) -> BertForPreTraining:
    """The model a run starts from (a resumed run then loads its checkpoint over it): fresh
    weights from --seed, a run's or a shipped model's weights, or MiniLM with fresh heads;
    with --unigram-bias the decoder bias from `sequences`, with --freeze-word-embeddings the
    word embeddings (and the tied decoder) fixed; the fast path as --unpad / --sparse-mlm say."""
    from ..data.documents import unigram_log_probs

    if cfg.init_from == MINILM:
        model = minilm_with_fresh_heads(cfg.seed, cfg.attn_implementation)
    else:
        seed_everything(cfg.seed)  # the initial weights come from --seed too: same command, same run
        model = BertForPreTraining(_model_config(cfg, len(tokenizer)))
        if cfg.init_from and not resume:
            _load_weights(model, Path(cfg.init_from))
    if cfg.unigram_bias:
        with torch.no_grad():
            model.mlm.decoder.bias[: len(tokenizer)].copy_(unigram_log_probs(sequences, len(tokenizer),
                                                                             tokenizer.special_ids))
    if cfg.freeze_word_embeddings:
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    if not cfg.nsp and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # MLM only under torchrun: the NSP head and the pooler feeding it get no gradient, so they
        # are frozen and DDP needs no find_unused_parameters (a full search of the graph each step).
        # One process keeps them trainable, so its optimizer state (and a resume) is as before.
        for part in (model.nsp, model.bert.pooler):
            if part is not None:
                part.requires_grad_(False)
    set_fast_path(model, unpad=cfg.unpad, sparse_mlm=cfg.sparse_mlm)
    return model


def _nsp_frozen(model) -> bool:
    return not any(p.requires_grad for p in model.nsp.parameters())


def minilm_with_fresh_heads(seed: int, attn_implementation: str = "sdpa") -> BertForPreTraining:
    """all-MiniLM-L6-v2's encoder and pooler (`bertedu.interop.load_minilm`) inside a
    `BertForPreTraining` whose MLM and NSP heads are fresh, drawn from `seed`; the MLM
    decoder is tied to MiniLM's own word embeddings."""
    from ..interop import load_minilm

    bert = load_minilm()
    seed_everything(seed)  # the heads' initialisation draws from the global generator
    model = BertForPreTraining(dataclasses.replace(bert.config, attn_implementation=attn_implementation))
    model.bert.load_state_dict(bert.state_dict())
    return model


def build_datasets(cfg: PretrainConfig, corpus, tokenizer, out: Path):
    """(training data set, held-out data set) as a run with these settings reads them."""
    from ..data import build_pretraining_dataset

    if cfg.stream:  # examples on disk, one shard of documents in memory at a time
        dataset, eval_docs = streamed_dataset(cfg, corpus, tokenizer, out)
    else:
        train_docs, eval_docs = split_documents(corpus_documents(cfg, corpus), cfg.eval_documents, cfg.seed)
        train_docs += extra_documents(cfg)
        dataset = build_pretraining_dataset(train_docs, tokenizer, masking=cfg.masking, dupe_factor=cfg.dupe_factor,
                                            mlm_probability=cfg.mlm_probability, **_example_settings(cfg))
    return dataset, _heldout_dataset(cfg, eval_docs, tokenizer)


def extra_documents(cfg: PretrainConfig) -> list:
    """The documents of --extra-corpus, in the order given: training text only."""
    from ..data.corpora import load_corpus

    docs = []
    for spec in (cfg.extra_corpus or "").split(","):
        if spec.strip():
            with as_user_error("--extra-corpus", ValueError):
                docs.extend(load_corpus(spec.strip()))
    return docs


def _example_settings(cfg: PretrainConfig) -> dict:
    """How documents become examples, the same for the training and the held-out set."""
    return dict(max_seq_length=cfg.max_seq_length, short_seq_prob=cfg.short_seq_prob,
                whole_word=cfg.whole_word, seed=cfg.seed, packing=cfg.packing)


def heldout_dataset(cfg: PretrainConfig, tokenizer):
    """The held-out data set a run with these settings evaluates on (no training set built)."""
    from ..data.corpora import load_corpus

    if cfg.stream:
        raise SettingError("heldout_dataset reads an in-memory corpus (no --stream)")
    if cfg.packing == "documents":
        raise SettingError("a --packing documents run is measured on its held-out documents, not on examples: "
                           "held_out_measure(cfg, tokenizer, document_data(cfg, corpus, tokenizer)[1]); or pass "
                           "packing='pairs' to rebuild its held-out documents as sentence pairs")
    _, eval_docs = split_documents(corpus_documents(cfg, load_corpus(cfg.corpus)), cfg.eval_documents, cfg.seed)
    return _heldout_dataset(cfg, eval_docs, tokenizer)


def _heldout_dataset(cfg: PretrainConfig, eval_docs, tokenizer):
    from ..data import build_pretraining_dataset

    # Held-out examples get one fixed mask each, so every evaluation sees the same task.
    eval_dataset = build_pretraining_dataset(eval_docs, tokenizer, masking="static", **_example_settings(cfg))
    eval_dataset.examples = eval_dataset.examples[: cfg.max_eval_examples]
    return eval_dataset


def _model_config(cfg: PretrainConfig, vocab_size: int) -> BertConfig:
    if cfg.max_seq_length > 512:
        raise SettingError(f"max_seq_length {cfg.max_seq_length} is above BERT's 512 positions")
    if cfg.init_from in MASKED_LMS:  # a shipped masked LM: its own architecture, not --preset's
        shipped = read_config(masked_lm_dir(cfg.init_from))
        config = BertConfig(**{**shipped, "attn_implementation": cfg.attn_implementation})
        if cfg.max_seq_length > config.max_position_embeddings:
            raise SettingError(f"--init-from {cfg.init_from} has {config.max_position_embeddings} positions, "
                               f"fewer than --max-seq-length {cfg.max_seq_length}")
        return config
    return BertConfig.preset(cfg.preset, vocab_size=vocab_size, attn_implementation=cfg.attn_implementation,
                             pad_vocab_to_multiple_of=cfg.pad_vocab_to_multiple_of)


def _load_weights(model: torch.nn.Module, run_dir: Path) -> None:
    if str(run_dir) in MASKED_LMS:  # shipped weights, sha256-checked as they load
        model.load_state_dict(load_masked_lm(str(run_dir))[0].state_dict())
        return
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise MissingFileError(f"--init-from {run_dir}: no checkpoint-<step> folder in it")
    load_weights(checkpoint, model)


def load_pretrained(run_dir: str | Path, impl: str = "fast"):
    """(BertForPreTraining in eval mode, tokenizer) from a pretraining run's folder."""
    run_dir = Path(run_dir)
    checkpoint = latest_checkpoint(run_dir)
    if checkpoint is None:
        raise MissingFileError(f"{run_dir} has no checkpoint-<step> folder: is it a `bertedu pretrain --out` folder?")
    config = BertConfig(**read_config(checkpoint))
    model = load_weights_into_new(checkpoint, lambda: BertForPreTraining(config))  # no throw-away init
    tokenizer = load_vocab_tokenizer(run_dir / VOCAB_NAME, impl=impl)
    return model.eval(), tokenizer


def run_config(name_or_run: str | Path, **overrides) -> PretrainConfig:
    """The settings a shipped masked LM (by name) or a run folder was pretrained with, from its
    run.json, as a PretrainConfig (with `overrides`); vocab is the folder's own vocab.txt and out
    None, so `heldout_dataset(run_config(name), tokenizer)` rebuilds the run's held-out set.
    Keys that record a result rather than a setting (a shipped model's trained_length) are left out."""
    folder = masked_lm_or_run_dir(name_or_run)
    settings = json.loads((folder / RUN_NAME).read_text(encoding="utf-8"))
    fields = {f.name for f in dataclasses.fields(PretrainConfig)}
    settings = {k: v for k, v in settings.items() if k in fields}
    return PretrainConfig(**{**settings, "vocab": str(folder / VOCAB_NAME), "out": None, **overrides})


def load_masked_lm_or_run(name_or_run: str | Path, impl: str = "fast"):
    """(BertForPreTraining in eval mode, tokenizer): a masked LM shipped with the course by
    name (`bertedu.pretrained.MASKED_LMS`), else a pretraining run's folder."""
    if str(name_or_run) in MASKED_LMS:
        return load_masked_lm(str(name_or_run), impl=impl)
    return load_pretrained(name_or_run, impl=impl)


@torch.no_grad()
def fill_mask(model: BertForPreTraining, tokenizer, text: str, top_k: int = 5) -> list[list[tuple[str, float]]]:
    """Top-k predictions (token, probability) for each [MASK] in `text` (all of them when top_k
    is more than the vocabulary holds)."""
    if top_k < 1:
        raise SettingError(f"top_k must be at least 1, got {top_k}")
    enc = tokenizer.encode(text, truncation=False)
    positions_known = model.config.max_position_embeddings
    if len(enc.input_ids) > positions_known:
        raise SettingError(f"the text is {len(enc.input_ids)} pieces with [CLS] and [SEP], more than the model's "
                           f"{positions_known} positions: shorten it to the sentences around the [MASK]")
    ids = torch.tensor([enc.input_ids])
    positions = (ids[0] == tokenizer.mask_token_id).nonzero().flatten()
    if len(positions) == 0:
        raise SettingError(f"no [MASK] in {text!r}: write [MASK] where the model should fill in a word")
    with eval_mode(model):
        logits = model(ids, torch.tensor([enc.token_type_ids])).mlm_logits[0, positions]  # (M, V)
    probs = logits.softmax(-1)
    special = torch.tensor(sorted(tokenizer.special_ids))
    probs[:, special] = 0.0  # a special token is never a word to fill in
    top = probs.topk(min(top_k, probs.shape[-1]), dim=-1)
    return [
        [(tokenizer.convert_ids_to_tokens([i])[0], p) for i, p in zip(row_ids.tolist(), row_p.tolist())]
        for row_ids, row_p in zip(top.indices, top.values)
    ]
