"""Notebook 17's study: BERT, GPT and an ELMo-style model trained on the same windows, then compared.

Notebook 17 and `benchmarks/elmo_study.py` (the same recipe over several seeds) share it:

    study_text()          wiki-en's first 40 articles to train on, the next 6 held out
    validation_text()     the 4 articles after those: where the learning-rate sweep chooses each model's rate
    study_tokenizer()     the 2,000 bert-base-uncased pieces those 40 articles use most, every character kept
    windows()             each article's pieces cut into [CLS] + 30 pieces + [SEP]: (n, T) with T = 32
    train_lm()            one of "bert" (masked LM), "gpt" (next token), "elmo" (two one-direction LMs), tiny
                          preset, no dropout, through `bertedu.training.loop.train` with `study_recipe()`
    STUDY_LR              each kind's peak learning rate, chosen by the recorded sweep (`study_recipe(kind=...)`)
    next_token_losses / previous_token_losses / masked_lm_losses / held_out_measures
                          held-out losses: GPT's or a forward LM's, the backward LM's, BERT's per selected piece
                          (split by what the input shows there: [MASK], a random piece, the piece itself)
    save_lm / load_lm     each kind's model trained by this recipe for 400 steps and shipped (WEIGHTS, made by
                          `benchmarks/elmo_weights.py --kind`): notebook 17 reads its BERT and GPT, its appendix
                          the ELMo-style model (`load_elmo`)
    cloze_sentences()     held-out sentences of 8-24 words whose middle word is one piece
    fill_masked / fill_left_only / fill_two_sided
                          the top piece for the hidden word: BERT reads both sides jointly at a [MASK], GPT the
                          left side only, the ELMo-style model adds its two one-sided guesses
    fill_bigram()         the same fill from piece counts (`bertedu.course.ngram.BigramLM`): one neighbour or two
    paired_se()           the standard error of a difference of means over the same items (bootstrap)
    TWO_SENSES, word_vectors(), split_rank()
                          the two-sense probe: a word in 8 sentences, 4 per sense; is the split by sense the
                          best of all 35 ways to halve them?

May import what it trains and reads: `model`, `family`, `data`, `pretrained`, `training`.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Callable, Sequence

import torch
import torch.nn.functional as F

from ..data import mask_tokens
from ..data.corpora import file_sha256, load_corpus
from ..data.tokenizer import SPECIAL_TOKENS, load_vocab_tokenizer, write_vocab
from ..family.elmo import ELMoConfig, ELMoStyleLM
from ..family.gpt import CausalLM, GPTConfig
from ..model.config import BertConfig
from ..model.constants import IGNORE_INDEX
from ..model.heads import BertForMaskedLM
from ..pretrained import WEIGHTS_DIR, checked_file, minilm_vocab_path
from ..training.config import TrainConfig, TrainResult
from ..training.loop import train
from .ngram import BigramLM

KINDS = ("bert", "gpt", "elmo")
# each kind's model, trained by study_recipe(steps=400, seed=0, kind=...) and shipped (benchmarks/elmo_weights.py --kind)
WEIGHTS = {"bert": WEIGHTS_DIR / "lm-study-bert", "gpt": WEIGHTS_DIR / "lm-study-gpt", "elmo": WEIGHTS_DIR / "elmo-study"}
ELMO_WEIGHTS = WEIGHTS["elmo"]  # the ELMo-style model of notebook 17's appendix
# The longer runs notebook 17 compares where both objectives have learnt: 6,000 steps of 32 windows (6.1M tokens,
# fifteen times the lesson's) on long_text()'s articles, BERT at 1e-3 (the rate that took the course's own masked LMs
# off the plateau, docs/pretraining.md), GPT at its sweep's 2e-3 (benchmarks/elmo_weights.py --articles all)
LONG_WEIGHTS = {"bert": WEIGHTS_DIR / "lm-study-long-bert", "gpt": WEIGHTS_DIR / "lm-study-long-gpt"}
LONG_STEPS, LONG_LR = 6000, {"bert": 1e-3, "gpt": 2e-3}
T = 32  # window length: [CLS] + 30 pieces + [SEP]
# Each kind's peak learning rate for the study's 400 steps: the lowest held-out loss on validation_text() of
# the sweep recorded in weights/elmo_study.json["lr_sweep"] (benchmarks/elmo_study.py --sweep; the record
# holds the command and every rate's losses). BERT by its loss at [MASK] positions, GPT by its next-token
# loss, the ELMo-style model by the mean of its two LMs' losses.
STUDY_LR = {"bert": 2e-3, "gpt": 2e-3, "elmo": 5e-2}
SELECTED_BY = {"bert": "[MASK] loss", "gpt": "next-token loss", "elmo": "mean of both LMs' losses"}


def study_text(n_train: int = 40, n_held_out: int = 6) -> tuple[list, list]:
    """wiki-en's first n_train articles (lists of sentences) and the n_held_out after them."""
    documents = list(itertools.islice(load_corpus("wiki-en"), n_train + n_held_out))
    return documents[:n_train], documents[n_train:]


def long_text(first_unused: int = 50) -> list:
    """The longer runs' training articles (benchmarks/elmo_weights.py --articles all): the study's 40 and every
    wiki-en article from `first_unused` on, never the held-out 40-45 or the sweep's 46-49."""
    documents = list(load_corpus("wiki-en"))
    return documents[:40] + documents[first_unused:]


def validation_text(n: int = 4, after: int = 46) -> list:
    """wiki-en's n articles after the first `after` (40 training, 6 held out): the learning-rate sweep's text,
    so that choosing a rate never reads the articles the comparisons are measured on."""
    return list(itertools.islice(load_corpus("wiki-en"), after, after + n))


def study_tokenizer(train_docs: list, vocab_path: str | Path, size: int = 2000):
    """A fast WordPiece tokenizer over `size` of bert-base-uncased's pieces, written to vocab_path.

    The special tokens, then every single character (as a word start and as ##continuation)
    that the articles use, then the other pieces by their count in the articles (notebook 06's vocabulary).
    """
    uncased = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    counts = Counter(p for doc in train_docs for sentence in uncased.tokenize_batch(doc) for p in sentence)
    letters = sorted({p.removeprefix("##") for p in counts if len(p.removeprefix("##")) == 1})
    characters = [form for c in letters for form in (c, "##" + c) if form in uncased.vocab]
    words = [p for p, _ in counts.most_common() if p not in characters and p not in SPECIAL_TOKENS]
    return load_vocab_tokenizer(write_vocab([*SPECIAL_TOKENS, *characters, *words][:size], vocab_path), impl="fast")


def windows(tokenizer, docs: list, length: int = T) -> torch.Tensor:
    """(n, length) LongTensor: each article's pieces, cut into [CLS] + (length - 2) pieces + [SEP], no padding."""
    rows = []
    for doc in docs:
        ids = [i for sentence in tokenizer.tokenize_batch(doc) for i in tokenizer.convert_tokens_to_ids(sentence)]
        for a in range(0, len(ids) - (length - 2) + 1, length - 2):
            rows.append([tokenizer.cls_token_id, *ids[a:a + length - 2], tokenizer.sep_token_id])
    return torch.tensor(rows)


def study_data(vocab_path: str | Path) -> tuple:
    """All of the above at once, as `benchmarks/elmo_study.py` and `elmo_weights.py` need it:
    (tokenizer written to vocab_path, the training windows (n, T), the held-out articles)."""
    train_docs, held_out_docs = study_text()
    tokenizer = study_tokenizer(train_docs, vocab_path)
    return tokenizer, windows(tokenizer, train_docs), held_out_docs


def study_recipe(steps: int = 400, seed: int = 0, kind: str | None = None, **overrides) -> TrainConfig:
    """Notebook 17's recipe: 32 windows a step, 6% warm-up, on the CPU, quiet; the peak lr is `kind`'s own
    (STUDY_LR, chosen by the sweep), or 2e-3 without a kind."""
    if kind is not None and kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}: choose one of {KINDS}")
    settings = dict(lr=STUDY_LR[kind] if kind else 2e-3, warmup_ratio=0.06, steps=steps, batch_size=32, seed=seed, log_every=1,
                    progress=False, device="cpu")  # CPU at either scale: the fills read CPU tensors
    return TrainConfig(**{**settings, **overrides})


def new_model(kind: str, vocab_size: int, seed: int = 0) -> torch.nn.Module:
    """The tiny preset of `kind`, dropout off, initialised from torch.manual_seed(seed)."""
    if kind not in KINDS:
        raise ValueError(f"unknown model kind {kind!r}: choose one of {KINDS}")
    torch.manual_seed(seed)
    if kind == "elmo":
        return ELMoStyleLM(ELMoConfig.tiny(vocab_size=vocab_size, dropout=0.0))
    no_dropout = dict(vocab_size=vocab_size, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return BertForMaskedLM(BertConfig.tiny(**no_dropout)) if kind == "bert" else CausalLM(GPTConfig.tiny(**no_dropout))


def collate_for(kind: str, tokenizer) -> Callable:
    """The batch maker of `kind`'s objective, over rows of one window each (no padding).

    bert: 15% of the pieces selected, 80/10/10 masking (notebook 05), new masks every step; [CLS] and [SEP]
    never selected. gpt and elmo: the window is its own label (the losses shift it, one way or both).
    """
    def collate_mlm(rows, generator=None):
        ids = torch.stack(rows)  # (B, T)
        special = (ids == tokenizer.cls_token_id) | (ids == tokenizer.sep_token_id)  # (B, T): never masked
        masked, labels = mask_tokens(ids, special.long(), mask_token_id=tokenizer.mask_token_id,
                                     vocab_size=len(tokenizer), special_ids=tokenizer.special_ids, generator=generator)
        return {"input_ids": masked, "labels": labels}

    def collate_lm(rows, generator=None):
        ids = torch.stack(rows)  # (B, T)
        return {"input_ids": ids, "labels": ids}

    return collate_mlm if kind == "bert" else collate_lm


def train_lm(kind: str, tokenizer, train_ids: torch.Tensor, recipe: TrainConfig,
             stop_at_step: int | None = None, resume: bool = False) -> tuple[torch.nn.Module, TrainResult]:
    """A fresh tiny `kind` (seeded by recipe.seed) trained on the windows train_ids (n, T); returned in eval mode.
    stop_at_step: stop there, on the whole recipe's schedule (the first steps of the shipped run).
    resume: go on from the latest checkpoint in recipe.out (the training loop's resume)."""
    model = new_model(kind, len(tokenizer), recipe.seed)
    run = train(model, list(train_ids), collate_for(kind, tokenizer), recipe, stop_at_step=stop_at_step, resume=resume)
    return model.eval(), run


RECIPE_KEYS = ("steps", "batch_size", "lr", "warmup_ratio", "weight_decay", "max_grad_norm", "betas", "eps", "seed")


def _recipe_of(recipe: TrainConfig) -> dict:
    return {k: list(v) if isinstance(v, tuple) else v for k, v in ((k, getattr(recipe, k)) for k in RECIPE_KEYS)}


def save_lm(model: torch.nn.Module, run: TrainResult, recipe: TrainConfig, tokenizer, folder: str | Path, command: str,
            machine: str) -> Path:
    """Ship a trained study model: model.safetensors, config.json, vocab.txt, run.json (the command, the
    machine, the recipe, the run's step, tokens and metrics records) and manifest.json (each file's sha256)."""
    from safetensors.torch import save_model

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    save_model(model, str(folder / "model.safetensors"))  # a tied embedding / output matrix stored once
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(model.config), indent=1) + "\n", encoding="utf-8")
    write_vocab(tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))), folder / "vocab.txt")
    (folder / "run.json").write_text(json.dumps({
        "command": command, "machine": machine, "recipe": _recipe_of(recipe),
        "steps": run.step, "tokens_seen": run.tokens_seen, "loss": run.loss, "elapsed_s": round(run.elapsed_s, 1),
        "records": [{k: r[k] for k in ("step", "loss", "lr", "grad_norm", "tokens") if k in r} for r in run.records
                    if r["step"] <= 100 or r["step"] % 10 == 0],  # every step of the first 100, then every 10th
    }, indent=1) + "\n", encoding="utf-8")
    files = {name: file_sha256(folder / name) for name in ("model.safetensors", "config.json", "vocab.txt", "run.json")}
    (folder / "manifest.json").write_text(json.dumps({"kind": type(model).__name__, "files": files}, indent=1) + "\n",
                                          encoding="utf-8")
    return folder


def load_lm(kind: str, tokenizer, recipe: TrainConfig, folder: str | Path | None = None) -> tuple[torch.nn.Module, TrainResult]:
    """The shipped `kind` model (`save_lm`'s folder; WEIGHTS[kind] by default), sha256-checked, in eval mode, and
    its run (steps, tokens read, the metrics records). It must have been trained on `tokenizer`'s vocabulary
    (`study_tokenizer`) with `recipe` (`study_recipe`), in `new_model(kind)`'s shape: a ValueError says which differs."""
    from safetensors.torch import load_model

    folder = Path(WEIGHTS[kind] if folder is None else folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    paths = {name: checked_file(folder / name, sha256) for name, sha256 in manifest["files"].items()}
    shipped_vocab = paths["vocab.txt"].read_text(encoding="utf-8").splitlines()
    if shipped_vocab != tokenizer.convert_ids_to_tokens(list(range(len(tokenizer)))):
        raise ValueError(f"{folder} was trained on another vocabulary than this tokenizer's: build it with "
                         "lm_study.study_tokenizer(lm_study.study_text()[0], ...)")
    run = json.loads(paths["run.json"].read_text(encoding="utf-8"))
    if run["recipe"] != _recipe_of(recipe):
        differ = {k: (run["recipe"].get(k), v) for k, v in _recipe_of(recipe).items() if run["recipe"].get(k) != v}
        raise ValueError(f"{folder} was trained with another recipe: (shipped, asked) {differ}")
    model = new_model(kind, len(tokenizer))
    if json.loads(paths["config.json"].read_text(encoding="utf-8")) != json.loads(json.dumps(dataclasses.asdict(model.config))):
        raise ValueError(f"{folder} holds another shape of {kind} model than new_model({kind!r}) makes")
    load_model(model, str(paths["model.safetensors"]))
    return model.eval(), TrainResult(step=run["steps"], loss=run["loss"], tokens_seen=run["tokens_seen"],
                                     elapsed_s=run["elapsed_s"], checkpoint=str(folder), records=run["records"])


def load_long(kind: str, tokenizer) -> tuple[torch.nn.Module, TrainResult]:
    """The shipped longer run of `kind` ("bert" or "gpt"): LONG_STEPS steps at LONG_LR[kind] (`load_lm` checks it)."""
    recipe = study_recipe(steps=LONG_STEPS, seed=0, kind=kind, lr=LONG_LR[kind])
    return load_lm(kind, tokenizer, recipe, LONG_WEIGHTS[kind])


def load_elmo(tokenizer, recipe: TrainConfig, folder: str | Path = ELMO_WEIGHTS) -> tuple[ELMoStyleLM, TrainResult]:
    """The shipped ELMo-style model of notebook 17's appendix: `load_lm("elmo", ...)`."""
    return load_lm("elmo", tokenizer, recipe, folder)


def words_of(tokenizer, sentence: str) -> list[str]:
    """The sentence's words as the tokenizer splits them (a word = a piece and its ## continuations)."""
    out: list[str] = []
    for piece in tokenizer.tokenize(sentence):
        if piece.startswith("##") and out:
            out[-1] += piece[2:]
        else:
            out.append(piece)
    return out


def cloze_sentences(tokenizer, docs: list) -> list[tuple[str, str, str]]:
    """(left words, the hidden word, right words) for each sentence of 8-24 words (at most 30 pieces)
    whose middle word is alphabetic and one piece of the vocabulary."""
    cloze = []
    for doc in docs:
        for sentence in doc:
            w = words_of(tokenizer, sentence)
            k = len(w) // 2
            if 8 <= len(w) <= 24 and w[k].isalpha() and w[k] in tokenizer.vocab and len(tokenizer.tokenize(sentence)) <= 30:
                cloze.append((" ".join(w[:k]), w[k], " ".join(w[k + 1:])))
    return cloze


def pad(rows: list[list[int]], value: int) -> tuple[torch.Tensor, torch.Tensor]:
    """A list of lists of ids -> (B, T) LongTensor, right-padded with value, and the attention mask (B, T)."""
    T_max = max(map(len, rows))
    ids = torch.tensor([r + [value] * (T_max - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (T_max - len(r)) for r in rows])
    return ids, mask


def no_special(scores: torch.Tensor, tokenizer) -> torch.Tensor:
    """scores (B, V) with the special tokens at -inf: a special token is never a word."""
    scores = scores.clone()
    scores[:, sorted(tokenizer.special_ids)] = float("-inf")
    return scores


@torch.no_grad()
def fill_masked(model, tokenizer, texts: Sequence[str], closed: bool = True, scores: bool = False) -> torch.Tensor:
    """(B,) the top piece at the one [MASK] of each text, BERT-style: the model reads both sides at once.
    closed=False: the closing [SEP] is hidden from attention, so a text that stops at its [MASK] is read as
    unfinished (`[CLS] left [MASK]` and nothing said about what follows) rather than as ending there.
    scores=True: (B, V) the log-probabilities over the pieces that are words (special tokens at -inf) instead."""
    batch = tokenizer.encode_batch(list(texts))
    mask = batch["attention_mask"].clone()  # (B, T)
    if not closed:
        mask[batch["input_ids"] == tokenizer.sep_token_id] = 0  # a hidden key: no position reads it
    logits = model(batch["input_ids"], attention_mask=mask).mlm_logits  # (B, T, V)
    words = no_special(logits[batch["input_ids"] == tokenizer.mask_token_id], tokenizer)  # (B, V)
    return words.log_softmax(-1) if scores else words.argmax(-1)


def _piece_ids(tokenizer, text: str) -> list[int]:
    return tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))


@torch.no_grad()
def fill_left_only(model, tokenizer, lefts: Sequence[str], scores: bool = False) -> torch.Tensor:
    """(B,) GPT's most likely next piece after [CLS] + each left side: it cannot read the right side.
    scores=True: (B, V) the log-probabilities over the pieces that are words instead."""
    rows = [[tokenizer.cls_token_id, *_piece_ids(tokenizer, left)] for left in lefts]
    ids, mask = pad(rows, tokenizer.pad_token_id)
    logits = model(ids, attention_mask=mask).logits  # (B, T, V)
    last = mask.sum(1) - 1  # (B,) each row's last real position
    words = no_special(logits[torch.arange(len(rows)), last], tokenizer)  # (B, V)
    return words.log_softmax(-1) if scores else words.argmax(-1)


@torch.no_grad()
def fill_two_sided(model: ELMoStyleLM, tokenizer, cloze: Sequence[tuple[str, str, str]], sides: str = "both") -> torch.Tensor:
    """(B,) the ELMo-style guess: log p_fwd(. | [CLS] left) + log p_bwd(. | right [SEP]), its top piece.

    The row is [CLS] left [MASK] right [SEP]; neither direction reads the hidden position, so the
    [MASK] there is only a placeholder (any token gives the same scores). sides="left" or "right":
    one direction's guess alone (the forward LM's, or the backward LM's).
    """
    if sides not in ("both", "left", "right"):
        raise ValueError(f"sides must be 'both', 'left' or 'right', got {sides!r}")
    rows, where = [], []
    for left, _, right in cloze:
        left_ids = [tokenizer.cls_token_id, *_piece_ids(tokenizer, left)]
        rows.append([*left_ids, tokenizer.mask_token_id, *_piece_ids(tokenizer, right), tokenizer.sep_token_id])
        where.append(len(left_ids))
    ids, mask = pad(rows, tokenizer.pad_token_id)
    at = (torch.arange(len(rows)), torch.tensor(where))
    if sides == "both":
        scores = model.fill_middle_log_probs(ids, mask)[at]  # (B, V)
    else:
        out = model(ids, mask)  # the forward LM's logits at t - 1, or the backward LM's at t + 1, score t
        scores = out.forward_logits[at[0], at[1] - 1] if sides == "left" else out.backward_logits[at[0], at[1] + 1]
    return no_special(scores, tokenizer).argmax(-1)


def most_frequent_word(tokenizer, train_ids: torch.Tensor) -> str:
    """The alphabetic piece the windows train_ids (n, T) hold most often, [CLS] not counted: the baseline answer."""
    counts = torch.bincount(train_ids[:, 1:].flatten(), minlength=len(tokenizer))  # (V,)
    return max((w for w in tokenizer.vocab if w.isalpha()), key=lambda w: counts[tokenizer.vocab[w]])


def fill_bigram(bigram: BigramLM, tokenizer, cloze: Sequence[tuple[str, str, str]], sides: str = "both") -> torch.Tensor:
    """(B,) the top piece between each left side's last piece (or [CLS]) and the right side's first (or [SEP])
    by piece counts: log p(w | left piece) + log p(right piece | w) (sides="both"), or the first term alone
    ("left")."""
    if sides not in ("both", "left"):
        raise ValueError(f"sides must be 'both' or 'left', got {sides!r}")
    lefts = torch.tensor([([tokenizer.cls_token_id] + _piece_ids(tokenizer, left))[-1] for left, _, _ in cloze])
    rights = torch.tensor([(_piece_ids(tokenizer, right) + [tokenizer.sep_token_id])[0] for _, _, right in cloze])
    scores = bigram.log_probs[lefts]  # (B, V): log p(w | left piece)
    if sides == "both":
        scores = scores + bigram.log_probs[:, rights].T  # (B, V): + log p(right piece | w)
    return no_special(scores, tokenizer).argmax(-1)


def middle_word_hits(models: dict, tokenizer, cloze: Sequence[tuple[str, str, str]], always: str,
                     bigram: BigramLM | None = None) -> dict[str, torch.Tensor]:
    """Per reader, (n,) bool: is its top piece the hidden word? models: "bert", "gpt", "elmo" -> trained model;
    with `bigram`, also the piece counts' fill from the left piece and from both neighbours (`fill_bigram`)."""
    answers = torch.tensor([tokenizer.vocab[word] for _, word, _ in cloze])
    lefts = [left for left, _, _ in cloze]
    hits = {
        "BERT, both sides": fill_masked(models["bert"], tokenizer, [f"{l} [MASK] {r}" for l, _, r in cloze]) == answers,
        "GPT, left side": fill_left_only(models["gpt"], tokenizer, lefts) == answers,
        "ELMo-style, both sides": fill_two_sided(models["elmo"], tokenizer, cloze) == answers,
        "ELMo-style, left LM": fill_two_sided(models["elmo"], tokenizer, cloze, sides="left") == answers,
        "ELMo-style, right LM": fill_two_sided(models["elmo"], tokenizer, cloze, sides="right") == answers,
    }
    if bigram is not None:
        hits["bigram, left piece"] = fill_bigram(bigram, tokenizer, cloze, sides="left") == answers
        hits["bigram, both neighbours"] = fill_bigram(bigram, tokenizer, cloze) == answers
    hits[f"always {always!r}"] = answers == tokenizer.vocab[always]
    return hits


def paired_se(a: torch.Tensor, b: torch.Tensor, n_boot: int = 2000) -> float:
    """Standard error of mean(a) - mean(b) for scores of the same items (a, b: (n,)), by a bootstrap over the items."""
    d = a.double() - b.double()  # (n,)
    resampled = torch.randint(len(d), (n_boot, len(d)), generator=torch.Generator().manual_seed(0))  # (n_boot, n)
    return float(d[resampled].mean(-1).std())


@torch.no_grad()
def next_token_losses(model, ids: torch.Tensor) -> torch.Tensor:
    """(n,) each window's mean -log p(x_{t+1} | x_0..x_t) over pieces 1..T-2 of ids (n, T) (the closing [SEP]
    is not scored): GPT's loss, or the ELMo-style model's forward LM's."""
    out = model(ids)
    logits = out.forward_logits if isinstance(model, ELMoStyleLM) else out.logits  # (n, T, V): t scores t + 1
    return F.cross_entropy(logits[:, :-2].transpose(1, 2), ids[:, 1:-1], reduction="none").mean(1)


@torch.no_grad()
def previous_token_losses(model: ELMoStyleLM, ids: torch.Tensor) -> torch.Tensor:
    """(n,) each window's mean -log p(x_t | x_{t+1}..x_{T-1}) over pieces 1..T-2 (the opening [CLS] is not
    scored): the ELMo-style model's backward LM."""
    logits = model(ids).backward_logits  # (n, T, V): position t scores t - 1
    return F.cross_entropy(logits[:, 2:].transpose(1, 2), ids[:, 1:-1], reduction="none").mean(1)


MLM_SHOWN = ("[MASK]", "a random piece", "the piece itself")  # what the input holds at a selected piece


@torch.no_grad()
def masked_lm_losses(model, tokenizer, ids: torch.Tensor, seed: int = 0) -> dict[str, torch.Tensor]:
    """BERT's loss at each selected piece of ids (n, T) under one fixed draw of the training masks (15%,
    80/10/10, `collate_for("bert")` seeded by seed). Returns (M,) tensors: "loss", "label", "window" (the row)
    and "shown", an index into MLM_SHOWN: at "the piece itself" the answer is in the input."""
    batch = collate_for("bert", tokenizer)(list(ids), torch.Generator().manual_seed(seed))
    selected = batch["labels"] != IGNORE_INDEX  # (n, T)
    logits = model(batch["input_ids"]).mlm_logits[selected]  # (M, V)
    labels, shown = batch["labels"][selected], batch["input_ids"][selected]  # (M,) each
    kind = torch.where(shown == tokenizer.mask_token_id, 0, torch.where(shown == labels, 2, 1))  # (M,)
    return {"loss": F.cross_entropy(logits, labels, reduction="none"), "label": labels,
            "window": selected.nonzero()[:, 0], "shown": kind}


def held_out_measures(kind: str, model, tokenizer, ids: torch.Tensor) -> dict[str, float]:
    """`kind`'s held-out losses on windows ids (n, T), named as SELECTED_BY names the one the sweep selects by."""
    if kind == "bert":
        m = masked_lm_losses(model, tokenizer, ids)
        return {"all-target loss": float(m["loss"].mean()), "[MASK] loss": float(m["loss"][m["shown"] == 0].mean())}
    if kind == "gpt":
        return {"next-token loss": float(next_token_losses(model, ids).mean())}
    forward, backward = float(next_token_losses(model, ids).mean()), float(previous_token_losses(model, ids).mean())
    return {"next-token loss": forward, "previous-token loss": backward, "mean of both LMs' losses": (forward + backward) / 2}


# The two-sense probe: a word, 4 sentences in each sense. Every word is one piece both in the
# 2,000-piece study vocabulary and in MiniLM's, and word2vec has a vector for it.
TWO_SENSES = {
    "may": {
        "month": ["the new government took office in may of that year .",
                  "the festival is held every year in early may .",
                  "he died on the third of may in paris .",
                  "the war ended in may and the army went home ."],
        "verb": ["some of these plants may grow in the water .",
                 "a player may not use his hands in this game .",
                 "the word may have come from the greek language .",
                 "such a change may take many years to happen ."],
    },
    "left": {
        "direction": ["the river runs to the left of the old road .",
                      "on the left side of the map is the sea .",
                      "the left hand holds the shield and the right the sword .",
                      "turn left at the church and walk to the bridge ."],
        "departed": ["he left the city and moved to the north .",
                     "she left the school after only two years .",
                     "the army left the town before the winter came .",
                     "they left their homes during the war ."],
    },
}


def word_vectors(encode: Callable[[dict], torch.Tensor], tokenizer, sentences: Sequence[str], word: str) -> torch.Tensor:
    """(len(sentences), D): the vector of `word` (one piece, once per sentence) in each sentence.

    encode(batch) -> (B, T, D) reads `tokenizer.encode_batch(sentences)`'s batch.
    """
    batch = tokenizer.encode_batch(list(sentences))
    where = batch["input_ids"] == tokenizer.vocab[word]  # (B, T)
    if not where.sum(1).eq(1).all():
        raise ValueError(f"every sentence must hold {word!r} exactly once, as one piece")
    with torch.no_grad():
        return encode(batch)[where]


def sense_gap(cosines: torch.Tensor, in_group: torch.Tensor) -> float:
    """Mean cosine within the two groups minus across them; cosines (n, n), in_group (n,) bool."""
    n = len(in_group)
    together = (in_group[:, None] == in_group[None, :]) & ~torch.eye(n, dtype=torch.bool)  # (n, n)
    return float(cosines[together].mean() - cosines[in_group[:, None] != in_group[None, :]].mean())


def split_rank(vectors: torch.Tensor, in_first_sense: torch.Tensor) -> tuple[float, int, int]:
    """The true split's sense gap, its rank among all ways of halving the items (1 = the widest gap,
    ties counted against it), and the number of ways. vectors (n, D), in_first_sense (n,) bool."""
    n = len(in_first_sense)
    x = F.normalize(vectors.double(), dim=-1)
    cosines = x @ x.T  # (n, n)
    splits = [torch.tensor([k in group for k in range(n)]) for group in itertools.combinations(range(n), n // 2) if 0 in group]
    gap = sense_gap(cosines, in_first_sense)
    rank = 1 + sum(sense_gap(cosines, split) >= gap - 1e-12 for split in splits if not _same_split(split, in_first_sense))
    return gap, rank, len(splits)


def _same_split(a: torch.Tensor, b: torch.Tensor) -> bool:
    return bool(torch.equal(a, b) or torch.equal(a, ~b))


def probe_ranks(encode: Callable[[dict], torch.Tensor], tokenizer, words: dict = TWO_SENSES) -> dict[str, tuple[float, int]]:
    """word -> (sense gap, rank of the split by sense among the 35 halvings) of encode's vectors in `words`' sentences."""
    out = {}
    for word, senses in words.items():
        groups = list(senses.values())
        vectors = word_vectors(encode, tokenizer, [s for group in groups for s in group], word)  # (8, D)
        first = torch.tensor([k < len(groups[0]) for k in range(len(vectors))])
        gap, rank, _ = split_rank(vectors, first)
        out[word] = (gap, rank)
    return out
