"""Run folders laid out as `bertedu finetune`, `pretrain` and `distill` write them, holding tiny
random models, made in well under a second by the same functions those commands save with
(`save_finetuned`, `save_weights`): for the tests of `bertedu export` and `bertedu predict`,
which read a finished run and do not care how well it was trained."""

import json
from pathlib import Path

import torch

from bertedu.data.tokenizer import SPECIAL_TOKENS
from bertedu.model.config import BertConfig
from bertedu.model.heads import BertForPreTraining
from bertedu.model.tasks import BertForQuestionAnswering, BertForSequenceClassification, BertForTokenClassification
from bertedu.training.checkpoint import save_weights
from bertedu.training.finetune import save_finetuned

WORDS = ("the a of and to in is was he she it on for with as by at from his her that this film good bad great "
         "movie quick brown fox jumps over lazy dog paris capital france who what where john lives new york "
         "loved every minute . , ? ! 北 京 是 中 国 的 首 都").split()
TOPICS = ["animal", "food", "person"]
TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC"]


def write_vocab(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "vocab.txt"
    path.write_text("\n".join([*SPECIAL_TOKENS, *WORDS, "##s", "##ed"]) + "\n", encoding="utf-8")
    return path


def tiny_config() -> BertConfig:
    return BertConfig.tiny(vocab_size=len(SPECIAL_TOKENS) + len(WORDS) + 2, max_position_embeddings=128)


def finetune_run(folder: Path, kind: str, *, head: str = "softmax", pooling: str = "pooler", seed: int = 0,
                 task: str = "tiny-task") -> Path:
    """A finished fine-tuning run of `kind` (classification, pair-classification, tagging, qa)."""
    torch.manual_seed(seed)
    config = tiny_config()
    if kind in ("classification", "pair-classification"):
        labels = TOPICS if kind == "classification" else ["different", "same"]
        model, head_kwargs = BertForSequenceClassification(config, len(labels), pooling=pooling), \
            {"num_labels": len(labels), "pooling": pooling}
    elif kind == "tagging":
        labels = TAGS
        head_kwargs = {"num_labels": len(TAGS)}
        if head == "crf":
            head_kwargs.update(head="crf", label_names=TAGS)
        model = BertForTokenClassification(config, **head_kwargs)
        if head == "crf":
            with torch.no_grad():
                model.crf.transitions.normal_()
    else:
        labels, head_kwargs, model = [], {}, BertForQuestionAnswering(config)
    write_vocab(folder)
    info = {"task": task, "kind": kind, "labels": labels, "head": head_kwargs, "max_seq_length": 64,
            "init": "random"}
    save_finetuned(model.eval(), folder, info)
    results = {"task": task, "kind": kind, "config": {"doc_stride": 16, "max_query_length": 16,
                                                       "max_answer_length": 10, "batch_size": 4, "data_seed": 0}}
    (folder / "results.json").write_text(json.dumps(results), encoding="utf-8")
    return folder


def pretrain_run(folder: Path, *, nsp: bool = True, distilled_from: str | None = None, seed: int = 0,
                 trained_head: bool | None = None) -> Path:
    """A pretraining run (run.json with `nsp`), or a distillation run (distill.json) of a teacher.
    Its MLM head's LayerNorm is moved off its initial values as training would (`trained_head`;
    by default for a pretraining run, not for a student)."""
    torch.manual_seed(seed)
    write_vocab(folder)
    model = BertForPreTraining(tiny_config()).eval()
    if distilled_from is None if trained_head is None else trained_head:
        with torch.no_grad():
            model.mlm.layer_norm.weight.add_(0.01 * torch.randn_like(model.mlm.layer_norm.weight))
    save_weights(folder / "checkpoint-2", model)
    if distilled_from is None:
        (folder / "run.json").write_text(json.dumps({"nsp": nsp, "max_seq_length": 64}), encoding="utf-8")
    else:
        settings = {"teacher": distilled_from, "soft_weight": 0.0, "mlm_weight": 0.0, "init_student": None}
        (folder / "distill.json").write_text(json.dumps(settings), encoding="utf-8")
    return folder
