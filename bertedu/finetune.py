"""Fine-tuning end to end: task -> tokenizer and model -> shared training loop -> metrics.

`bertedu finetune` (bertedu/cli.py) is a thin shell around `finetune()`; the fine-tuning
notebooks (one per task family) introduce it and call the pieces directly.
Devlin et al. 2019, section 4: "we simply plug in the task-specific inputs and outputs
into BERT and fine-tune all the parameters end-to-end."

    task   an embedded task (sentiment-zh, ner-en, ner-zh, paraphrase-en, qa-cloze-en), a
           canonical one (sst2, mrpc, mnli, conll2003, squad) or a PATH (bertedu.data)
    init   "minilm": the real all-MiniLM-L6-v2 encoder and its 30,522-piece vocabulary;
           a `bertedu pretrain --out` folder: bertedu's own pretrained encoder and vocab;
           "random": no pretraining at all (`preset` size), the control that shows what
           pretraining buys

Each task family gets a `TaskIO` that turns examples into model inputs, batches them,
and turns model outputs back into predictions and metrics:

    classification / pair-classification   [CLS] A [SEP] (B [SEP]) -> one label
                                            accuracy, F1 (binary on labels[1]; macro if > 2)
    tagging                                 words -> pieces, first piece carries the tag
                                            entity-level precision / recall / F1
    qa                                      [CLS] question [SEP] window [SEP], sliding window
                                            SQuAD exact match / F1 (percentages)

Early stopping: train() runs in chunks of `eval_every` steps (`stop_at_step`, then
`resume=True` from the checkpoint it wrote: the data order, learning-rate schedule and
RNG continue exactly, so chunking changes nothing). After each chunk the dev set is
scored; the best weights are kept in memory, and after `patience` evaluations without
improvement the run stops. The best weights are restored at the end, whether or not the
run stopped early (model selection on dev, as the paper picks the best epoch on dev).

Everything lands in one folder `out`:

    vocab.txt                        the vocabulary the model reads
    checkpoint-<step>/               the last training checkpoint (train())
    metrics.jsonl, metrics.png       training loss and the dev evaluations (eval_*)
    model/                           the best weights: model.safetensors, config.json, task.json
    predictions_dev.jsonl, predictions_test.jsonl   {"id", "prediction", "gold"} per example
    results.json                     settings, dev and test metrics, the evaluations
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from .config import PRESETS, BertConfig
from .heads import IGNORE_INDEX
from .metrics import accuracy, entity_prf, f1_score, squad_metrics
from .tasks import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    align_word_labels,
    collate_qa,
    decode_qa,
    encode_words,
    freeze_encoder,
    qa_features,
    word_predictions,
)
from .tokenizer import load_vocab_tokenizer

log = logging.getLogger(__name__)
VOCAB_NAME = "vocab.txt"
MODEL_DIR = "model"
TASK_INFO_NAME = "task.json"
RESULTS_NAME = "results.json"
INITS = ("minilm", "random")  # or a `bertedu pretrain --out` folder


@dataclass(frozen=True)
class FinetuneConfig:
    """The settings of one fine-tuning run; each field is a `bertedu finetune` flag.

    Learning rate: the paper's grid for BERT-BASE is batch 16/32, lr 5e-5/3e-5/2e-5,
    2-4 epochs, warm-up over the first 10% of steps. `lr=None` picks 5e-5 for a pretrained
    encoder, 1e-4 for a random one (nothing to preserve, and small models take larger
    steps) and 1e-3 with a frozen encoder (only the small head learns).
    """

    task: Optional[str] = None
    init: str = "minilm"  # "minilm" | "random" | a `bertedu pretrain --out` folder
    out: str = "runs/finetune"
    preset: str = "mini"  # size of a random init (mini: `bertedu pretrain`'s default size)
    vocab: Optional[str] = None  # random init only; default MiniLM's (English), the task's characters (Chinese)
    # inputs (None: 128, or 384 for QA)
    max_seq_length: Optional[int] = None
    doc_stride: int = 128  # QA: context tokens between the starts of two windows
    max_query_length: int = 64  # QA: question pieces kept
    max_answer_length: int = 30  # QA: longest answer span, in tokens
    # budget: `steps` if given, else `epochs`
    epochs: float = 3.0
    steps: Optional[int] = None
    batch_size: int = 32
    lr: Optional[float] = None
    warmup_ratio: float = 0.1
    weight_decay: float = 0.01
    # data
    max_train: Optional[int] = None  # subsample (seeded) for quick CPU runs
    max_eval: Optional[int] = None
    data_seed: int = 0  # the task's split and subsample: keep fixed to compare runs
    # evaluation and early stopping
    eval_every: int = 0  # steps between dev evaluations; 0: once per epoch
    patience: Optional[int] = None  # stop after this many evaluations without improvement
    # feature-based use: frozen encoder (+ mean pooling for classification, as sentence-BERT)
    freeze_encoder: bool = False
    pooling: Optional[str] = None  # classification: "pooler" ([CLS]) or "mean"; None: mean iff frozen
    # hardware and bookkeeping
    precision: str = "auto"  # "auto": bf16 on CUDA, fp32 on CPU
    seed: int = 0
    log_every: int = 10
    progress: bool = True

    def __post_init__(self) -> None:
        from .data.task_data import TASKS

        if not self.task:
            raise ValueError(f"give a task: one of {', '.join(TASKS)}, or a PATH to data files")
        if self.task not in TASKS and not os.path.exists(os.path.expanduser(self.task)):
            raise ValueError(f"unknown task {self.task!r}: not one of {', '.join(TASKS)}, and no file or folder "
                             "by that name")
        if self.init not in INITS and not os.path.isdir(self.init):
            raise ValueError(f"init must be minilm, random or a `bertedu pretrain --out` folder; "
                             f"{self.init!r} is not a folder")
        if self.vocab is not None and self.init != "random":
            raise ValueError("vocab applies to init=random only: a pretrained encoder reads its own vocabulary")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.max_seq_length is not None and not 8 <= self.max_seq_length <= 512:
            raise ValueError(f"max_seq_length must be in 8..512 (BERT has 512 positions), got {self.max_seq_length}")
        for name in ("batch_size", "doc_stride", "max_query_length", "max_answer_length", "log_every"):
            if getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.steps is None and not self.epochs > 0:
            raise ValueError(f"give a budget: epochs > 0 or steps, got epochs={self.epochs}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience counts evaluations and must be at least 1 (or None), got {self.patience}")
        if self.eval_every < 0:
            raise ValueError(f"eval_every must be 0 (once per epoch) or a number of steps, got {self.eval_every}")
        if self.pooling not in (None, "pooler", "mean"):
            raise ValueError(f"pooling must be 'pooler' or 'mean', got {self.pooling!r}")
        if self.precision not in ("auto", "fp32", "bf16"):
            raise ValueError(f"precision must be auto, fp32 or bf16, got {self.precision!r}")

    def resolved_lr(self) -> float:
        if self.lr is not None:
            return self.lr
        if self.freeze_encoder:
            return 1e-3
        return 1e-4 if self.init == "random" else 5e-5

    def resolved_max_seq_length(self, kind: str) -> int:
        return self.max_seq_length or (384 if kind == "qa" else 128)


# ----------------------------------------------------------------------------------------
# Task families: examples <-> model inputs and outputs
# ----------------------------------------------------------------------------------------


def _pad(rows: list[list[int]], value: int) -> torch.Tensor:
    """Lists of different lengths -> (B, T) LongTensor, padded on the right with `value`."""
    T = max(len(r) for r in rows)
    return torch.tensor([r + [value] * (T - len(r)) for r in rows], dtype=torch.long)  # (B, T)


def _inputs(items: list[dict], pad_token_id: int) -> dict[str, torch.Tensor]:
    return {
        "input_ids": _pad([it["input_ids"] for it in items], pad_token_id),  # (B, T)
        "token_type_ids": _pad([it["token_type_ids"] for it in items], 0),  # (B, T)
        "attention_mask": _pad([[1] * len(it["input_ids"]) for it in items], 0),  # (B, T); padding unseen
    }


class TaskIO:
    """What fine-tuning needs to know about a task family (one subclass per family).

    encode(examples, training) -> items (what the data set holds; QA: one per window)
    collate(items, generator=None) -> batch dict for the model (labels when all have them)
    rows(output, items) -> one output per item, padding cut off
    decode(examples, items, rows) -> one prediction per example
    gold(example), score(examples, predictions) -> the metrics dict
    """

    main_metric = "accuracy"

    def __init__(self, task, tokenizer, max_seq_length: int):
        self.task, self.tokenizer, self.max_seq_length = task, tokenizer, max_seq_length

    def gold(self, example):
        raise NotImplementedError


class ClassificationIO(TaskIO):
    """Single sentences and pairs: `[CLS] A [SEP]` or `[CLS] A [SEP] B [SEP]`, one label."""

    main_metric = "accuracy"

    def __init__(self, task, tokenizer, max_seq_length: int):
        super().__init__(task, tokenizer, max_seq_length)
        self.label_ids = {label: i for i, label in enumerate(task.labels)}

    def encode(self, examples, training: bool = False) -> list[dict]:
        texts = [e.text_a if e.text_b is None else (e.text_a, e.text_b) for e in examples]
        # longest_first: a pair loses tokens from its longer side first
        enc = self.tokenizer.encode_batch(texts, max_length=self.max_seq_length, pad=False,
                                          truncation="longest_first") if texts else {"input_ids": []}
        items = []
        for i, e in enumerate(examples):
            if e.label is not None and e.label not in self.label_ids:
                raise ValueError(f"{self.task.name}: label {e.label!r} of example {e.id!r} is not one of "
                                 f"{self.task.labels}")
            items.append({"input_ids": enc["input_ids"][i], "token_type_ids": enc["token_type_ids"][i],
                          "label": self.label_ids.get(e.label)})
        return items

    def collate(self, items: list[dict], generator=None) -> dict[str, torch.Tensor]:
        batch = _inputs(items, self.tokenizer.pad_token_id)
        if all(it["label"] is not None for it in items):
            batch["labels"] = torch.tensor([it["label"] for it in items])  # (B,)
        return batch

    def rows(self, out, items) -> list[torch.Tensor]:
        return list(out.logits.float().cpu())  # B rows of (C,)

    def decode(self, examples, items, rows) -> list[str]:
        return [self.task.labels[int(r.argmax())] for r in rows]

    def gold(self, example):
        return example.label

    def score(self, examples, predictions) -> dict:
        golds = [self.label_ids[e.label] for e in examples]
        preds = [self.label_ids[p] for p in predictions]
        if len(self.task.labels) == 2:  # F1 of the second label: pos, paraphrase, equivalent
            f1 = f1_score(preds, golds, "binary", pos_label=1)
        else:
            f1 = f1_score(preds, golds, "macro")
        return {"accuracy": accuracy(preds, golds), "f1": f1}


class TaggingIO(TaskIO):
    """Words (or Chinese characters) with BIO tags; a word's first piece carries its tag,
    its other pieces and the specials get -100 (left out of the loss)."""

    main_metric = "f1"

    def __init__(self, task, tokenizer, max_seq_length: int):
        super().__init__(task, tokenizer, max_seq_length)
        self.label_ids = {label: i for i, label in enumerate(task.labels)}
        self.outside = self.label_ids.get("O", 0)

    def encode(self, examples, training: bool = False) -> list[dict]:
        items = []
        for e in examples:
            unknown = set(e.tags) - set(self.label_ids)
            if unknown:
                raise ValueError(f"{self.task.name}: tags {sorted(unknown)} of example {e.id!r} are not among "
                                 f"the task's labels {self.task.labels}")
            # Words past max_seq_length - 2 pieces are cut: they get no token, and "O" below.
            enc = encode_words(self.tokenizer, e.tokens, max_length=self.max_seq_length)
            items.append({"input_ids": enc.input_ids, "token_type_ids": enc.token_type_ids,
                          "labels": align_word_labels(enc.word_ids, [self.label_ids[t] for t in e.tags]),
                          "word_ids": enc.word_ids, "num_words": len(e.tokens)})
        return items

    def collate(self, items: list[dict], generator=None) -> dict[str, torch.Tensor]:
        batch = _inputs(items, self.tokenizer.pad_token_id)
        batch["labels"] = _pad([it["labels"] for it in items], IGNORE_INDEX)  # (B, T); padding never counts
        return batch

    def rows(self, out, items) -> list[torch.Tensor]:
        logits = out.logits.float().cpu()  # (B, T, C)
        return [logits[i, : len(it["input_ids"])] for i, it in enumerate(items)]  # (T_i, C) each

    def decode(self, examples, items, rows) -> list[list[str]]:
        labels = self.task.labels
        return [[labels[p] for p in word_predictions(r, it["word_ids"], it["num_words"], fill=self.outside)]
                for it, r in zip(items, rows)]

    def gold(self, example):
        return list(example.tags)

    def score(self, examples, predictions) -> dict:
        return entity_prf([e.tags for e in examples], predictions)


@dataclass
class _Window:
    example: int  # index of the example in the split
    feature: object  # a tasks.QAFeature


class QAIO(TaskIO):
    """SQuAD-style extractive QA with a sliding window: each example becomes one or more
    windows `[CLS] question [SEP] context piece [SEP]`; the answer is the best span over
    all windows of the example (`decode_qa`), cut out of the original context."""

    main_metric = "f1"

    def __init__(self, task, tokenizer, max_seq_length: int, doc_stride: int = 128,
                 max_query_length: int = 64, max_answer_length: int = 30):
        super().__init__(task, tokenizer, max_seq_length)
        self.doc_stride, self.max_query_length = doc_stride, max_query_length
        self.max_answer_length = max_answer_length

    def encode(self, examples, training: bool = False) -> list[_Window]:
        windows = []
        for i, e in enumerate(examples):
            if training and not e.answers:
                continue  # a question without an answer (SQuAD 2.0) has nothing to point at
            answer = e.answers[0] if e.answers else None  # train on the first gold answer
            features = qa_features(
                self.tokenizer, e.question, e.context, self.max_seq_length, self.doc_stride, self.max_query_length,
                answer_start=answer["answer_start"] if answer else None, answer_text=answer["text"] if answer else None,
            )
            windows.extend(_Window(i, f) for f in features)
        return windows

    def collate(self, items: list[_Window], generator=None) -> dict[str, torch.Tensor]:
        return collate_qa([w.feature for w in items], self.tokenizer.pad_token_id)

    def rows(self, out, items) -> list[tuple[torch.Tensor, torch.Tensor]]:
        start, end = out.start_logits.float().cpu(), out.end_logits.float().cpu()  # (B, T) each
        return [(start[i, : len(w.feature)], end[i, : len(w.feature)]) for i, w in enumerate(items)]

    def decode(self, examples, items, rows) -> list[str]:
        by_example: dict[int, list] = {}
        for w, r in zip(items, rows):
            by_example.setdefault(w.example, []).append((w.feature, r))
        predictions = []
        for i, e in enumerate(examples):
            windows = by_example.get(i, [])
            try:
                best = decode_qa([s for _, (s, _) in windows], [t for _, (_, t) in windows],
                                 [f for f, _ in windows], e.context, self.max_answer_length)
                predictions.append(best.text)
            except ValueError:  # no window with a valid span (an empty context)
                predictions.append("")
        return predictions

    def gold(self, example):
        return [a["text"] for a in example.answers]

    def score(self, examples, predictions) -> dict:
        golds = {e.id or str(i): self.gold(e) for i, e in enumerate(examples) if e.answers}
        preds = {e.id or str(i): p for i, (e, p) in enumerate(zip(examples, predictions))}
        return squad_metrics(preds, golds) if golds else {}


def task_io(task, tokenizer, cfg: FinetuneConfig) -> TaskIO:
    """The `TaskIO` for a `TaskData`'s kind, with `cfg`'s sequence settings."""
    length = cfg.resolved_max_seq_length(task.kind)
    if task.kind in ("classification", "pair-classification"):
        return ClassificationIO(task, tokenizer, length)
    if task.kind == "tagging":
        return TaggingIO(task, tokenizer, length)
    if cfg.doc_stride >= length:
        raise ValueError(f"doc_stride ({cfg.doc_stride}) must be below max_seq_length ({length})")
    return QAIO(task, tokenizer, length, cfg.doc_stride, cfg.max_query_length, cfg.max_answer_length)


@torch.no_grad()
def predict(model, io: TaskIO, examples: list, batch_size: int = 32, items: Optional[list] = None,
            precision: str = "fp32") -> tuple[list, Optional[float]]:
    """(one prediction per example, mean loss or None) for a split, in eval mode.

    `items`: the examples already encoded (`io.encode(examples)`), to encode only once.
    The loss is the mean over batches that have labels, weighted by their size.
    """
    items = io.encode(examples) if items is None else items
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    rows, loss_sum, loss_n = [], 0.0, 0
    autocast = (torch.autocast("cuda", dtype=torch.bfloat16) if precision == "bf16" and device.type == "cuda"
                else contextlib.nullcontext())
    for b in range(0, len(items), batch_size):
        chunk = items[b : b + batch_size]
        batch = {k: v.to(device) for k, v in io.collate(chunk).items()}
        with autocast:
            out = model(**batch)
        if out.loss is not None:
            loss_sum, loss_n = loss_sum + float(out.loss) * len(chunk), loss_n + len(chunk)
        rows.extend(io.rows(out, chunk))
    model.train(was_training)
    return io.decode(examples, items, rows), (loss_sum / loss_n if loss_n else None)


# ----------------------------------------------------------------------------------------
# Models and vocabularies
# ----------------------------------------------------------------------------------------


def _check_init(cfg: FinetuneConfig) -> None:
    """Fail before any work when --init names a folder that holds no pretraining run."""
    if cfg.init in INITS:
        return
    from .checkpoint import latest_checkpoint

    folder = Path(cfg.init)
    if latest_checkpoint(folder) is None:
        raise FileNotFoundError(f"--init {folder}: no checkpoint-<step> folder in it. Pass a `bertedu pretrain "
                                "--out` folder that finished at least one checkpoint, or minilm, or random.")
    if not (folder / VOCAB_NAME).is_file():
        raise FileNotFoundError(f"--init {folder}: no {VOCAB_NAME}; the model cannot read text without it")


def _random_init_vocab(cfg: FinetuneConfig, task, out: Path) -> Path:
    """The vocabulary for a randomly initialised model (copied or built into out/vocab.txt)."""
    from .pretrained import minilm_vocab_path

    if cfg.vocab:
        return Path(cfg.vocab)
    if task.language != "zh":
        return minilm_vocab_path()
    # Chinese: one token per character of the training text (Chinese BERT's choice).
    from .data.vocab import build_char_vocab

    def texts(e) -> list[str]:
        if hasattr(e, "tokens"):
            return [" ".join(e.tokens)]
        if hasattr(e, "question"):
            return [e.question, e.context]
        return [e.text_a] + ([e.text_b] if e.text_b is not None else [])

    return build_char_vocab([texts(e) for e in task.train], out / VOCAB_NAME, min_count=2)


def build_model(cfg: FinetuneConfig, task, out: Path):
    """(task model in train mode, tokenizer), with out/vocab.txt written.

    The head is chosen by the task's kind and initialised from `cfg.seed`; the encoder
    comes from `cfg.init`.
    """
    import shutil

    from .utils import seed_everything

    out.mkdir(parents=True, exist_ok=True)
    encoder = None
    if cfg.init == "minilm":
        from .interop import load_minilm
        from .pretrained import minilm_vocab_path

        encoder, vocab = load_minilm(), minilm_vocab_path()
    elif cfg.init == "random":
        vocab = _random_init_vocab(cfg, task, out)
    else:
        from .pretrain import load_pretrained

        encoder, _ = load_pretrained(cfg.init)
        encoder, vocab = encoder.bert, Path(cfg.init) / VOCAB_NAME
    if Path(vocab).resolve() != (out / VOCAB_NAME).resolve():
        shutil.copyfile(vocab, out / VOCAB_NAME)
    tokenizer = load_vocab_tokenizer(out / VOCAB_NAME, impl="fast")

    config = encoder.config if encoder is not None else BertConfig.preset(cfg.preset, vocab_size=len(tokenizer))
    if config.vocab_size != len(tokenizer):
        raise ValueError(f"the encoder has {config.vocab_size} token embeddings but {vocab} has {len(tokenizer)} "
                         "tokens: they must come from the same pretraining run")
    length = cfg.resolved_max_seq_length(task.kind)
    if length > config.max_position_embeddings:
        raise ValueError(f"max_seq_length {length} is beyond the model's {config.max_position_embeddings} positions")

    seed_everything(cfg.seed)  # the head's initialisation (and a random encoder's)
    head_kwargs = _head_kwargs(cfg, task)
    cls = _HEADS[task.kind]
    model = cls.from_encoder(encoder, **head_kwargs) if encoder is not None else cls(config, **head_kwargs)
    if cfg.freeze_encoder:
        freeze_encoder(model)
    return model.train(), tokenizer


_HEADS = {
    "classification": BertForSequenceClassification,
    "pair-classification": BertForSequenceClassification,
    "tagging": BertForTokenClassification,
    "qa": BertForQuestionAnswering,
}


def _head_kwargs(cfg: FinetuneConfig, task) -> dict:
    if task.kind in ("classification", "pair-classification"):
        pooling = cfg.pooling or ("mean" if cfg.freeze_encoder else "pooler")
        return {"num_labels": len(task.labels), "pooling": pooling}
    if task.kind == "tagging":
        return {"num_labels": len(task.labels)}
    return {}


def save_finetuned(model, out: str | os.PathLike, info: dict) -> Path:
    """Write out/model/: model.safetensors, config.json (BertConfig) and task.json (`info`)."""
    from safetensors.torch import save_model

    folder = Path(out) / MODEL_DIR
    folder.mkdir(parents=True, exist_ok=True)
    save_model(model, str(folder / "model.safetensors"))
    (folder / "config.json").write_text(json.dumps(dataclasses.asdict(model.config), indent=2) + "\n")
    (folder / TASK_INFO_NAME).write_text(json.dumps(info, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return folder


def load_finetuned(out: str | os.PathLike):
    """(model in eval mode, tokenizer, task info) from a `bertedu finetune --out` folder."""
    from safetensors.torch import load_model

    out = Path(out)
    folder = out / MODEL_DIR
    if not (folder / "model.safetensors").is_file():
        raise FileNotFoundError(f"{folder / 'model.safetensors'} is missing: is {out} a `bertedu finetune --out` "
                                "folder of a finished run?")
    info = json.loads((folder / TASK_INFO_NAME).read_text(encoding="utf-8"))
    config = BertConfig(**json.loads((folder / "config.json").read_text()))
    model = _HEADS[info["kind"]](config, **info["head"])
    load_model(model, str(folder / "model.safetensors"), strict=True)
    return model.eval(), load_vocab_tokenizer(out / VOCAB_NAME, impl="fast"), info


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


def _write_predictions(path: Path, examples, predictions, io: TaskIO, with_gold: bool) -> None:
    with open(path, "w", encoding="utf-8") as f:
        for i, (e, p) in enumerate(zip(examples, predictions)):
            row = {"id": e.id or str(i), "prediction": p, "gold": io.gold(e) if with_gold else None}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def _append_metrics(out: Path, record: dict) -> None:
    from .train import METRICS_NAME

    with open(out / METRICS_NAME, "a") as f:
        f.write(json.dumps(record) + "\n")


def train_with_early_stopping(model, io: TaskIO, train_items: list, dev: list, dev_items: list, train_cfg,
                              eval_every: int = 0, patience: Optional[int] = None, progress: bool = False):
    """Run `train()` in chunks of `eval_every` steps (0: one epoch), scoring `dev` after each.

    Each chunk ends with `stop_at_step` and a checkpoint in train_cfg.out_dir; the next
    resumes from it, so the data order, schedule and RNG go on exactly as in one run.
    The run stops when the budget is spent, or after `patience` evaluations in a row
    without a strictly better dev score (io.main_metric). Returns (best, evaluations,
    stopped_early): best = {"score", "step", "state" (a copy of the weights), "preds",
    "metrics"}; evaluations = [{"step", "loss", metric: value}] (also appended to
    metrics.jsonl as eval_* records). The model is left with the last weights.
    """
    from .train import train

    steps_per_epoch = len(train_items) // train_cfg.batch_size  # one process: dev scoring is not distributed
    every = eval_every or max(1, steps_per_epoch)
    evaluations, best, bad, step = [], None, 0, 0
    while True:
        result = train(model, train_items, io.collate, train_cfg, resume=step > 0, stop_at_step=step + every)
        step = result.step
        dev_preds, dev_loss = predict(model, io, dev, train_cfg.batch_size, dev_items, train_cfg.precision)
        metrics = io.score(dev, dev_preds)
        evaluation = {"step": step, "loss": dev_loss,
                      **{k: v for k, v in metrics.items() if isinstance(v, (int, float))}}
        evaluations.append(evaluation)
        _append_metrics(Path(train_cfg.out_dir),
                        {"step": step, **{f"eval_{k}": v for k, v in evaluation.items() if k != "step"}})
        score = metrics[io.main_metric]
        improved = best is None or score > best["score"]  # an equal score is no improvement
        if improved:  # a copy: training goes on changing the model's own tensors
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best, bad = {"score": score, "step": step, "state": state, "preds": dev_preds, "metrics": metrics}, 0
        else:
            bad += 1
        if progress:
            print(f"step {step}: dev {io.main_metric} {score:.4f}"
                  + (" (best)" if improved else f" ({bad} without improvement)"), flush=True)
        if result.stopped_by != "stop_at_step":
            return best, evaluations, False  # the budget is spent
        if patience is not None and bad >= patience:
            log.info("early stop at step %d: no dev improvement in %d evaluations", step, bad)
            return best, evaluations, True


def _score_other_splits(model, io: TaskIO, task, out: Path, batch_size: int, precision: str):
    """Predict test and any extra splits, write their predictions, score those with labels.
    Returns (test metrics or None, note, {extra split: metrics}, {extra split: size})."""
    test_metrics, note = None, ""
    if task.test:
        test_preds, _ = predict(model, io, task.test, batch_size, precision=precision)
        _write_predictions(out / "predictions_test.jsonl", task.test, test_preds, io, task.test_has_labels)
        if task.test_has_labels:
            test_metrics = io.score(task.test, test_preds)
        else:
            note = "the test split's labels are hidden (GLUE): dev metrics only; test predictions written unscored"
    else:
        note = "no test split: dev metrics only"
    extra, extra_sizes = {}, {}  # further evaluation sets, e.g. MNLI's dev_mismatched
    for name, examples in task.extra_splits.items():
        labelled = bool(examples) and all(io.gold(e) is not None for e in examples)
        preds, _ = predict(model, io, examples, batch_size, precision=precision)
        _write_predictions(out / f"predictions_{name}.jsonl", examples, preds, io, labelled)
        if labelled:
            extra[name], extra_sizes[name] = io.score(examples, preds), len(examples)
    return test_metrics, note, extra, extra_sizes


def finetune(cfg: FinetuneConfig) -> dict:
    """Fine-tune as `cfg` says; returns (and writes to out/results.json) the results:

    {"task", "kind", "init", "dev": metrics, "test": metrics or None, "extra", "note",
     "best_step", "steps", "stopped_early", "evaluations": [{"step", "loss", metrics}],
     "train_examples", "train_features", "dev_examples", "test_examples", "lr",
     "elapsed_s", "config"}

    dev/test metrics: classification {accuracy, f1} and tagging {precision, recall, f1,
    per_type} are fractions; QA {exact_match, f1} are percentages. Where the test split
    has no labels (GLUE) or is missing, "test" is None and "note" says so; "extra" scores
    further labelled evaluation splits (MNLI's dev_mismatched). One process (not torchrun).
    """
    from .checkpoint import latest_checkpoint
    from .data.task_data import load_task
    from .train import TrainConfig
    from .viz import plot_metrics

    start_time = time.perf_counter()
    out = Path(cfg.out)
    if latest_checkpoint(out) is not None:
        raise FileExistsError(f"{out} already holds a fine-tuning run ({latest_checkpoint(out).name}): "
                              "choose another --out, or delete this one")
    _check_init(cfg)
    task = load_task(cfg.task, seed=cfg.data_seed)
    if cfg.max_train is not None or cfg.max_eval is not None:
        task = task.subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    if not task.train or not task.dev:
        raise ValueError(f"{task.name} needs a train and a dev split to fine-tune and select on; got {task.summary()}")
    model, tokenizer = build_model(cfg, task, out)
    io = task_io(task, tokenizer, cfg)
    if not any(io.gold(e) for e in task.dev):
        raise ValueError(f"{task.name}'s dev split has no labels: the best weights are chosen on dev, so it needs them")

    train_items = io.encode(task.train, training=True)
    dev_items = io.encode(task.dev)
    cuda = torch.cuda.is_available()
    precision = ("bf16" if cuda else "fp32") if cfg.precision == "auto" else cfg.precision
    train_cfg = TrainConfig(
        lr=cfg.resolved_lr(), weight_decay=cfg.weight_decay, warmup_ratio=cfg.warmup_ratio,
        max_steps=cfg.steps, epochs=None if cfg.steps is not None else cfg.epochs,
        batch_size=cfg.batch_size, seed=cfg.seed, precision=precision, out_dir=str(out),
        log_every=cfg.log_every, eval_every=0, save_every=0, keep_checkpoints=1, progress=cfg.progress,
    )
    best, evaluations, stopped_early = train_with_early_stopping(model, io, train_items, task.dev, dev_items,
                                                                 train_cfg, cfg.eval_every, cfg.patience, cfg.progress)
    model.load_state_dict(best["state"])  # the best weights on dev, whatever came after

    info = {"task": task.name, "kind": task.kind, "labels": task.labels, "head": _head_kwargs(cfg, task),
            "max_seq_length": io.max_seq_length, "init": cfg.init}
    save_finetuned(model, out, info)
    _write_predictions(out / "predictions_dev.jsonl", task.dev, best["preds"], io, with_gold=True)
    test_metrics, note, extra, extra_sizes = _score_other_splits(model, io, task, out, cfg.batch_size, precision)
    records_path = out / "metrics.jsonl"
    if records_path.exists() and records_path.read_text().strip():
        plot_metrics(records_path, out / "metrics.png")

    results = {
        "task": task.name, "kind": task.kind, "init": cfg.init, "description": task.description,
        "dev": best["metrics"], "test": test_metrics, "extra": extra, "note": note, "main_metric": io.main_metric,
        "best_step": best["step"], "steps": evaluations[-1]["step"], "stopped_early": stopped_early,
        "evaluations": evaluations,
        "train_examples": len(task.train), "train_features": len(train_items),
        "dev_examples": len(task.dev), "test_examples": len(task.test), "extra_examples": extra_sizes,
        "lr": train_cfg.lr, "elapsed_s": time.perf_counter() - start_time, "config": dataclasses.asdict(cfg),
    }
    (out / RESULTS_NAME).write_text(json.dumps(results, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    return results


def results_table(results: dict, digits: int = 4) -> str:
    """The dev and test metrics as a small text table (numbers rounded; per-type detail left out)."""
    rows = [(split, results[split]) for split in ("dev", "test") if results.get(split)]
    rows += list(results.get("extra", {}).items())
    names = [k for k, v in rows[0][1].items() if isinstance(v, (int, float))] if rows else []
    sizes = {"dev": results.get("dev_examples"), "test": results.get("test_examples"),
             **results.get("extra_examples", {})}
    header = ["split", "examples", *names]
    lines = [header] + [[split, str(sizes[split]), *(f"{m[k]:.{2 if results['kind'] == 'qa' else digits}f}"
                                                     for k in names)] for split, m in rows]
    widths = [max(len(line[i]) for line in lines) for i in range(len(header))]
    text = "\n".join("  ".join(cell.ljust(w) for cell, w in zip(line, widths)).rstrip() for line in lines)
    return text + (f"\n({results['note']})" if results.get("note") else "")
