"""A finished fine-tuning run used on new text (`bertedu predict`) and scored on a task
(`bertedu evaluate`), without the Python of notebook 08.

    bertedu predict RUN "a moving , beautiful film"          one JSON line per input
    bertedu predict RUN --file inputs.txt --out preds.jsonl
    bertedu evaluate RUN --task topic-en                      the test split's metrics

An input is one line of text; a sentence pair is `first<TAB>second`, a question
`question<TAB>context`. Each output line holds the input, the prediction and its
probabilities:

    classification  {"input": {"text"[, "text_pair"]}, "prediction": label,
                     "probabilities": {label: p}}
    tagging         {"input": {"text"}, "words": [...], "prediction": [tag per word],
                     "probabilities": [p of that tag per word]} (None with a CRF head: its
                     Viterbi path has no per-word probabilities)
    qa              {"input": {"question", "context"}, "prediction": answer text,
                     "answers": [{"text", "start", "end", "score", "probability"}]}: the
                     best spans over all windows, start/end character offsets in the
                     context, score = start logit + end logit, probability its softmax
                     over the spans listed

The model, tokenizer and settings are the run's own (model/task.json, results.json), so
the input is cut into pieces and windows as in training; decoding is `TaskIO`'s.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

import torch

from ..data.formats import QAExample, TaggingExample, TextClassificationExample
from ..data.qa import top_spans
from ..errors import MissingFileError, SettingError, as_user_error
from ..pretrained import MASKED_LMS
from ..utils import eval_mode
from .masked_lms import FINETUNE_TASK
from .taskio import QAIO, ClassificationIO, TaggingIO, TaskIO

# Words of a sentence to tag: each CJK character alone (as the Chinese tasks are tagged), runs
# of letters and digits (with inner ' or -), and each other symbol alone.
_CJK = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_WORD = re.compile(rf"[{_CJK}]|[^\W{_CJK}]+(?:['’-][^\W{_CJK}]+)*|[^\w\s]")


@dataclass(frozen=True)
class RunSettings:
    """The input settings a fine-tuning run was trained with (`taskio.InputSettings`)."""

    max_seq_length: int
    doc_stride: int = 128
    max_query_length: int = 64
    max_answer_length: int = 30
    segment_ids: bool = True
    batch_size: int = 32
    data_seed: int = 0
    max_train: Optional[int] = None  # the run's subsamples: its own training and evaluation sets
    max_eval: Optional[int] = None
    columns: tuple = ()  # a PATH task's (setting, column) pairs: text_column, text_pair_column, label_column
    task: Optional[str] = None  # the run's --task (a name, or the PATH its data was read from)

    def resolved_max_seq_length(self, kind: str) -> int:
        return self.max_seq_length


@dataclass
class _Labels:
    """What a TaskIO reads of a task when there is no data: its name, kind and labels."""

    name: str
    kind: str
    labels: list


def load_run(run: str | Path):
    """(model in eval mode, tokenizer, task info, RunSettings) of a `bertedu finetune --out` folder."""
    from .finetune import RESULTS_NAME, load_finetuned

    run = Path(run)
    if not (run / FINETUNE_TASK).is_file():
        masked_lm = str(run) in MASKED_LMS or str(run) == "minilm" or (run / "run.json").is_file() or \
            (run / "distill.json").is_file()
        hint = "a masked LM or pretraining run: use `bertedu fill-mask`" if masked_lm else \
            "pass the --out folder of a finished `bertedu finetune`"
        raise MissingFileError(f"{run} holds no fine-tuned model ({FINETUNE_TASK} is missing): {hint}")
    with as_user_error(str(run), FileNotFoundError, KeyError, ValueError):
        model, tokenizer, info = load_finetuned(run)
    config = {}
    if (run / RESULTS_NAME).is_file():
        config = json.loads((run / RESULTS_NAME).read_text(encoding="utf-8")).get("config", {})
    fields = ("doc_stride", "max_query_length", "max_answer_length", "segment_ids", "batch_size", "data_seed",
              "max_train", "max_eval")
    columns = tuple((k, config[k]) for k in ("text_column", "text_pair_column", "label_column") if config.get(k))
    settings = RunSettings(info["max_seq_length"], **{k: config[k] for k in fields if config.get(k) is not None},
                           columns=columns, task=config.get("task") or info["task"])
    return model, tokenizer, info, settings


def run_io(info: dict, tokenizer, settings: RunSettings, task=None) -> TaskIO:
    """The run's TaskIO, for `task` (scoring) or for its labels alone (predicting new text)."""
    task = task or _Labels(info["task"], info["kind"], list(info["labels"]))
    length = settings.max_seq_length
    if info["kind"] in ("classification", "pair-classification"):
        return ClassificationIO(task, tokenizer, length, settings.segment_ids)
    if info["kind"] == "tagging":
        return TaggingIO(task, tokenizer, length)
    version2 = "null_threshold" in info  # SQuAD 2.0: "" when no span beats [CLS] by the threshold chosen on dev
    io = QAIO(task, tokenizer, length, settings.doc_stride, settings.max_query_length, settings.max_answer_length,
              version2)
    io.null_threshold = info.get("null_threshold", 0.0)
    return io


def parse_inputs(lines: list[str], kind: str) -> list:
    """Input lines -> examples of the run's kind (pairs and questions split at the first TAB)."""
    examples = []
    for n, line in enumerate(lines, 1):
        line = line.rstrip("\n").rstrip("\r")
        if not line.strip():
            raise SettingError(f"input {n} is empty: give one text per line")
        parts = _check_parts(n, line, kind)
        if kind == "qa":
            examples.append(QAExample(id=str(n), question=parts[0], context=parts[1], answers=[]))
        elif kind == "tagging":
            words = _WORD.findall(line)
            examples.append(TaggingExample(tokens=words, tags=[], id=str(n)))
        else:
            examples.append(TextClassificationExample(parts[0], parts[1] if len(parts) == 2 else None, id=str(n)))
    return examples


def _check_parts(n: int, line: str, kind: str) -> list[str]:
    """The TAB-separated parts of input `n`: two non-blank ones for pairs and questions, one for a
    single-sentence classifier (a pair given to it is refused, not read as one sentence)."""
    parts = line.split("\t")
    if kind in ("pair-classification", "qa"):
        what = "question<TAB>context" if kind == "qa" else "first sentence<TAB>second sentence"
        if len(parts) != 2:
            found = "no TAB" if len(parts) == 1 else f"{len(parts)} TAB-separated parts"
            raise SettingError(f"input {n} has {found}: this run reads {what} ({line[:40]!r})")
        if not all(part.strip() for part in parts):
            raise SettingError(f"input {n} has an empty side of its TAB: this run reads {what} ({line[:40]!r})")
    elif kind == "classification" and len(parts) > 1:
        raise SettingError(f"input {n} holds a TAB, as a sentence pair would: this run classifies single "
                           f"sentences; remove the TAB, or use a run fine-tuned on pairs ({line[:40]!r})")
    return parts


@torch.no_grad()
def predict_rows(model, io: TaskIO, items: list, batch_size: int = 32) -> list:
    """The model's rows (`io.rows`: logits, a CRF's tags, QA start/end) for encoded `items`."""
    rows = []
    with eval_mode(model):
        for b in range(0, len(items), batch_size):
            chunk = items[b: b + batch_size]
            batch = {k: v for k, v in io.collate(chunk).items() if k != "labels"}
            rows.extend(io.rows(model(**batch), chunk))
    return rows


def predict_texts(run: str | Path, lines: list[str], top_k: int = 5) -> list[dict]:
    """One output row (see the module docstring) per input line, from the run in `run`."""
    model, tokenizer, info, settings = load_run(run)
    examples = parse_inputs(lines, info["kind"])
    io = run_io(info, tokenizer, settings)
    if info["kind"] == "tagging":  # TaggingIO.encode checks tags against the labels: give each word the first
        examples = [TaggingExample(e.tokens, [info["labels"][0]] * len(e.tokens), e.id) for e in examples]
    items = io.encode(examples)
    rows = predict_rows(model, io, items, settings.batch_size)
    predictions = io.decode(examples, items, rows)
    if info["kind"] == "qa":  # one item per window: the rows of an example are found by its index
        return [_qa_row(e, p, io, items, rows, i, top_k) for i, (e, p) in enumerate(zip(examples, predictions))]
    words = [{"words": list(e.tokens)} if isinstance(e, TaggingExample) else {} for e in examples]
    return [{"input": _given(line, e), **w, "prediction": p, "probabilities": score}
            for line, e, w, p, score in zip(lines, examples, words, predictions, predictions.scores)]


def _given(line: str, example) -> dict:
    """The input as read: {"text"} or, for a pair, {"text", "text_pair"}."""
    if isinstance(example, TextClassificationExample) and example.text_b is not None:
        return {"text": example.text_a, "text_pair": example.text_b}
    return {"text": line.rstrip("\r\n")}


def evaluate_run(run: str | Path, task_name: Optional[str] = None, split: str = "test",
                 max_eval: Optional[int] = None, columns: Optional[dict] = None) -> dict:
    """Score the fine-tuned model in `run` on a split of a task (default: the task it was
    fine-tuned on), read with the run's own data seed and columns (`columns`, the
    COLUMN_OPTIONS of `bertedu.data.user_files`, override them): {"run", "task", "split",
    "examples", "loss", "metrics"} (metrics as `bertedu finetune` reports them).

    On the run's own task each split is the one the run had (its --max-train / --max-eval
    subsample), so the test split gives the numbers in its results.json; `max_eval` instead
    scores a seeded subsample of at most that many examples of `split`, whichever it is."""
    from .taskio import predict

    model, tokenizer, info, settings = load_run(run)
    task = _evaluation_task(settings, task_name, split, max_eval, columns or {})
    _check_task_fits(task, info, str(run))
    splits = task.splits()
    if split not in splits or not splits[split]:
        raise SettingError(f"{task.name} has no {split} split; it has " + ", ".join(k for k, v in splits.items() if v))
    examples = splits[split]
    io = run_io(info, tokenizer, settings, task)
    if not all(io.gold(e) for e in examples):
        raise SettingError(f"{task.name}'s {split} split has no labels (GLUE hides its test labels): "
                           "score --split dev instead")
    predictions, loss = predict(model, io, examples, settings.batch_size)
    return {"run": str(run), "task": task.name, "split": split, "examples": len(examples), "loss": loss,
            "metrics": io.score(examples, predictions)}


def _evaluation_task(settings: RunSettings, task_name: Optional[str], split: str, max_eval: Optional[int],
                     columns: dict):
    """The task to score, its splits cut as the run cut them (its own task) or by `max_eval`."""
    from ..data.task_data import load_task

    name = task_name or settings.task
    own = name == settings.task
    columns = {**(dict(settings.columns) if own else {}), **{k: v for k, v in columns.items() if v}}
    with as_user_error(f"--task {name}", FileNotFoundError, ValueError, KeyError):
        task = load_task(name, seed=settings.data_seed, **columns)
    if max_eval is None and own:  # the run's own training and evaluation sets
        limits = (settings.max_train, settings.max_eval)
    else:  # --max-eval limits the split scored, the training split included
        limits = (max_eval, None) if split == "train" else (None, max_eval)
    if limits != (None, None):
        task = task.subsample(*limits, settings.data_seed)
    return task


def _check_task_fits(task, info: dict, run: str) -> None:
    """Refuse a task of another kind or other labels than the run's head was trained for."""
    if task.kind != info["kind"]:
        raise SettingError(f"{run} was fine-tuned for {info['kind']} ({info['task']}); {task.name} is a {task.kind} task")
    if list(task.labels) != list(info["labels"]):
        raise SettingError(f"{run} was fine-tuned on {info['task']} with labels {', '.join(info['labels'])}; "
                           f"{task.name} has labels {', '.join(task.labels)}")


def _qa_row(example, prediction: str, io: QAIO, items: list, rows: list, index: int, top_k: int) -> dict:
    windows = [(w.feature, r) for w, r in zip(items, rows) if w.example == index]
    spans = {}
    for feature, (start, end) in windows:
        found = top_spans(start, end, io.max_answer_length, torch.tensor(feature.context_mask), top_k,
                          torch.tensor(feature.max_context))
        for s, e, score in found:
            begin, stop = feature.offsets[s][0], feature.offsets[e][1]
            if (begin, stop) not in spans or spans[(begin, stop)] < score:
                spans[(begin, stop)] = score
    best = sorted(spans.items(), key=lambda kv: -kv[1])[:top_k]
    probs = torch.tensor([score for _, score in best]).softmax(-1).tolist() if best else []
    answers = [{"text": example.context[b:e], "start": b, "end": e, "score": round(score, 4),
                "probability": round(p, 6)} for ((b, e), score), p in zip(best, probs)]
    return {"input": {"question": example.question, "context": example.context}, "prediction": prediction,
            "answers": answers}
