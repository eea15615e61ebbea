"""`bertedu distill`: a smaller BERT trained to imitate a bigger one, on the shared training loop.

    bertedu distill --teacher minilm --layers 0,2,4 --steps 600 --out runs/distil-minilm
    bertedu finetune --task paraphrase-en --init runs/distil-minilm --out runs/para-student

The student starts as a copy of the teacher with some of its layers (DistilBERT: every
other one, `--layers 0,2,4` of MiniLM's six) and learns, on the embedded English text, to
produce what the teacher produces. The losses (`bertedu.family.distillation`) are weighted sums of

    hidden      TinyBERT: MSE between student hidden state m and teacher hidden state g(m),
                g the uniform map (3 of 6 layers: 0->0, 1->2, 2->4, 3->6), embeddings included
    attention   TinyBERT: MSE between the attention maps of the same layer pairs
    cosine      DistilBERT: 1 - cos between the last hidden states
    soft        DistilBERT: T^2 KL between the softened MLM distributions (a teacher with an MLM head)
    mlm         DistilBERT: the ordinary MLM loss on the masked pieces (a teacher with an MLM head)

all-MiniLM-L6-v2 ships without an MLM head, so `--teacher minilm` uses the first three (the
default weights); a masked LM (`minilm-mlm`, `course-en`, a `bertedu pretrain` folder) can
also use DistilBERT's soft targets and MLM loss (`--soft-weight 5 --mlm-weight 2`). The input
is masked (15%, 80/10/10) only when one of those two weighs in.

Deliberate deviation from DistilBERT's architecture (`bertedu.family.distilbert`): the student here
keeps the teacher's token-type embeddings and pooler, so it is an ordinary `BertForPreTraining`
that reads sentence pairs as the teacher does, and every tool that takes a pretraining run
(`bertedu finetune --init`, `bertedu fill-mask`, `load_pretrained`) takes a distillation run.

Every random draw (the data order, masks, dropout, a fresh head) comes from `--seed`; the
checkpoints are the student's alone (the teacher is not part of the module, so it is neither
trained nor saved), and `--resume` continues an interrupted run as `bertedu pretrain` does.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

import torch

from ..model.constants import VOCAB_NAME
from ..family.distillation import hidden_cosine_loss, soft_target_loss, tinybert_layer_loss
from ..model.encoder import BertModel
from ..errors import MissingFileError, SettingError, as_user_error
from ..model.heads import BertForPreTraining, masked_lm_loss
from .distributed import is_main_process
from .jobs import make_out_folder
from .progress import stage
from .loop import TrainConfig, TrainResult, train
from ..utils import seed_everything, setting

RUN_NAME = "distill.json"
Teacher = Union[BertModel, BertForPreTraining]


@dataclass(frozen=True)
class DistillConfig(TrainConfig):
    """`bertedu distill`'s settings; the training loop's come from `TrainConfig`."""

    teacher: str = setting("minilm", "the model to imitate: minilm (the real all-MiniLM-L6-v2), a masked LM "
                                     "shipped with the course (minilm-mlm, course-en), or a `bertedu pretrain` folder")
    layers: str = setting("0,2,4", "the teacher layers the student starts from, in order (DistilBERT: every "
                                   "other one); their number is the student's depth")
    corpus: str = setting("wiki-en,bible-en:web", "the text to distil on, comma-separated corpus names; wiki-en's "
                                                   "held-out documents (as `bertedu pretrain` holds them out) are left out "
                                                   "and give the held-out loss; task:NAME is an embedded task's training "
                                                   "inputs, one sequence each, labels unused (TinyBERT's task-specific "
                                                   "stage, e.g. task:ner-en)")
    init_student: Optional[str] = setting(None, "start the student from this distillation or pretraining run instead "
                                                "of teacher layers (--layers is then ignored): a second stage, e.g. "
                                                "on a task's text after the general text")
    max_seq_length: int = setting(128, "word pieces per sequence, [CLS] and [SEP] included")
    hidden_weight: float = setting(1.0, "weight of TinyBERT's hidden-state MSE (all mapped layers)")
    attention_weight: float = setting(1.0, "weight of TinyBERT's attention-map MSE (all mapped layers)")
    cosine_weight: float = setting(1.0, "weight of DistilBERT's cosine loss on the last hidden states")
    soft_weight: float = setting(0.0, "weight of DistilBERT's soft-target loss (DistilBERT: 5; needs a teacher "
                                      "with an MLM head)")
    mlm_weight: float = setting(0.0, "weight of the MLM loss on masked pieces (DistilBERT: 2; needs a teacher "
                                     "with an MLM head)")
    temperature: float = setting(2.0, "softmax temperature of the soft-target loss (DistilBERT: 2)")
    max_eval_sequences: int = setting(256, "held-out wiki-en sequences scored at each evaluation")
    lr: float = setting(1e-4, "peak learning rate of AdamW")
    precision: str = setting("auto", "auto (bf16 autocast on CUDA, fp32 on CPU), fp32 or bf16")

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.out is None:
            raise ValueError("out is required: the folder the student's checkpoints go to")
        layers = self.layer_indices()
        if not layers:
            raise ValueError(f"layers must be teacher layer indices such as 0,2,4, got {self.layers!r}")
        if min(self.hidden_weight, self.attention_weight, self.cosine_weight, self.soft_weight, self.mlm_weight) < 0:
            raise ValueError("loss weights cannot be negative")
        if not any((self.hidden_weight, self.attention_weight, self.cosine_weight, self.soft_weight, self.mlm_weight)):
            raise ValueError("at least one loss weight must be positive")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if not 8 <= self.max_seq_length <= 512:
            raise ValueError(f"max_seq_length must be between 8 and 512, got {self.max_seq_length}")

    def layer_indices(self) -> list[int]:
        try:
            return [int(i) for i in self.layers.split(",") if i.strip()]
        except ValueError:
            raise ValueError(f"layers must be comma-separated teacher layer indices such as 0,2,4, "
                             f"got {self.layers!r}") from None

    @property
    def masks_input(self) -> bool:
        """DistilBERT masks the input for its MLM and soft-target losses; the others need no mask."""
        return self.soft_weight > 0 or self.mlm_weight > 0


# ---- teacher and student -----------------------------------------------------------------


def load_teacher(name: str) -> tuple[Teacher, Path]:
    """(teacher in eval mode, its vocab.txt) for --teacher: minilm, a shipped masked LM, a run folder."""
    from ..pretrained import MASKED_LMS

    if name == "minilm":
        from ..interop import load_minilm
        from ..pretrained import minilm_vocab_path

        return load_minilm().eval(), minilm_vocab_path()
    if name in MASKED_LMS:
        from ..pretrained import load_masked_lm, masked_lm_vocab_path

        return load_masked_lm(name)[0].eval(), masked_lm_vocab_path(name)
    if not os.path.isdir(name):
        raise MissingFileError(f"--teacher {name}: not minilm, a shipped masked LM ({', '.join(MASKED_LMS)}) "
                               "or a folder")
    from .pretrain import load_pretrained

    return load_pretrained(name)[0].eval(), Path(name) / VOCAB_NAME


def student_from_teacher(teacher: Teacher, layers: list[int]) -> BertForPreTraining:
    """A `BertForPreTraining` with the teacher's embeddings, the teacher layers `layers` (in
    order), its pooler, and its MLM and NSP heads where it has them (else fresh ones, drawn
    from the global generator: seed it first). No tensor is shared with the teacher."""
    encoder = teacher if isinstance(teacher, BertModel) else teacher.bert
    depth = encoder.config.num_hidden_layers
    if any(not 0 <= i < depth for i in layers):
        raise SettingError(f"--layers {','.join(map(str, layers))}: the teacher's layers are 0..{depth - 1}")
    config = dataclasses.replace(encoder.config, num_hidden_layers=len(layers))
    student = BertForPreTraining(config)
    with torch.no_grad():
        student.bert.embeddings.load_state_dict(encoder.embeddings.state_dict())
        for j, i in enumerate(layers):
            student.bert.layers[j].load_state_dict(encoder.layers[i].state_dict())
        if encoder.pooler is not None:
            student.bert.pooler.load_state_dict(encoder.pooler.state_dict())
        if isinstance(teacher, BertForPreTraining):
            student.mlm.load_state_dict(teacher.mlm.state_dict())  # decoder.weight: the word embeddings again
            student.nsp.load_state_dict(teacher.nsp.state_dict())
    return student


def initial_student(run: str, teacher_vocab: Path) -> BertForPreTraining:
    """The student of an earlier run (`bertedu distill` or `bertedu pretrain`), to distil further.
    Its vocabulary must be the teacher's: both read the same input ids."""
    from .pretrain import load_pretrained

    folder = Path(run)
    if not (folder / VOCAB_NAME).is_file():
        raise MissingFileError(f"--init-student {run}: no {VOCAB_NAME} there; pass a `bertedu distill` or "
                               "`bertedu pretrain` output folder")
    if (folder / VOCAB_NAME).read_bytes() != Path(teacher_vocab).read_bytes():
        raise SettingError(f"--init-student {run}: its vocabulary is not the teacher's, so they would read "
                           "different pieces")
    return load_pretrained(run)[0]


@dataclass
class DistillationOutput:
    loss: torch.Tensor  # the weighted sum the student is trained on
    hidden: Optional[torch.Tensor] = None
    attention: Optional[torch.Tensor] = None
    cosine: Optional[torch.Tensor] = None
    soft: Optional[torch.Tensor] = None
    mlm_loss: Optional[torch.Tensor] = None


class DistillingStudent(BertForPreTraining):
    """The student, whose forward pass also runs the teacher and returns the distillation loss.

    The teacher is held outside the module tree: `parameters()`, `state_dict()` and the
    checkpoints are the student's alone, and `train()` leaves the teacher in eval mode.
    """

    def __init__(self, student: BertForPreTraining, teacher: Teacher, cfg: DistillConfig):
        super().__init__(student.config)
        self.load_state_dict(student.state_dict())
        object.__setattr__(self, "teacher", teacher.eval().requires_grad_(False))
        self.weights = {name: getattr(cfg, f"{name}_weight") for name in ("hidden", "attention", "cosine", "soft", "mlm")}
        self.temperature = cfg.temperature
        s_layers = student.config.num_hidden_layers
        t_layers = (teacher if isinstance(teacher, BertModel) else teacher.bert).config.num_hidden_layers
        if (self.weights["hidden"] or self.weights["attention"]) and t_layers % s_layers:
            raise SettingError(f"TinyBERT's layer map needs the teacher's {t_layers} layers to be a multiple of the "
                               f"student's {s_layers}: pass --hidden-weight 0 --attention-weight 0, or other --layers")
        if (self.weights["soft"] or self.weights["mlm"]) and not isinstance(teacher, BertForPreTraining):
            raise SettingError("--soft-weight and --mlm-weight need a teacher with an MLM head (minilm-mlm, course-en "
                               "or a pretraining run); all-MiniLM-L6-v2 has none")

    def forward(self, input_ids, attention_mask=None, token_type_ids=None, labels=None, **_) -> DistillationOutput:
        teacher = self.teacher
        if next(teacher.parameters()).device != input_ids.device:
            teacher.to(input_ids.device)
        w, parts = self.weights, {}
        student_logits = bool(w["soft"] or (w["mlm"] and labels is not None))
        # MLM logits, (B, T, V), only where a loss reads them: the hidden, attention and cosine terms
        # need the encoders alone, and skipping the heads changes no loss, gradient or random draw
        encode = dict(attention_mask=attention_mask, token_type_ids=token_type_ids, output_hidden_states=True,
                      output_attentions=True)
        teacher_encoder = teacher.bert if isinstance(teacher, BertForPreTraining) and not w["soft"] else teacher
        with torch.no_grad():
            t = teacher_encoder(input_ids, **encode)
        s = super().forward(input_ids, **encode) if student_logits else self.bert(input_ids, **encode)
        if w["hidden"] or w["attention"]:
            layerwise = tinybert_layer_loss(s.hidden_states, t.hidden_states, s.attentions, t.attentions,
                                            attention_mask=attention_mask)
            parts["hidden"], parts["attention"] = layerwise.hidden, layerwise.attention
        if w["cosine"]:
            parts["cosine"] = hidden_cosine_loss(s.hidden_states[-1], t.hidden_states[-1], attention_mask)
        if w["soft"]:
            parts["soft"] = soft_target_loss(s.mlm_logits, t.mlm_logits, self.temperature, attention_mask)
        if w["mlm"] and labels is not None:
            parts["mlm_loss"] = masked_lm_loss(s.mlm_logits, labels)
        loss = sum(w["mlm" if name == "mlm_loss" else name] * value for name, value in parts.items())
        return DistillationOutput(loss=loss, **parts)

    def to_student(self) -> BertForPreTraining:
        """A plain `BertForPreTraining` with the student's weights (no teacher attached)."""
        student = BertForPreTraining(self.config)
        student.load_state_dict(self.state_dict())
        return student.eval()


# ---- data --------------------------------------------------------------------------------


def distillation_sequences(cfg: DistillConfig, tokenizer) -> tuple[list[list[int]], list[list[int]]]:
    """(training, held-out) sequences of `[CLS] pieces [SEP]`, cut from whole documents.

    Held-out: wiki-en's held-out documents (`bertedu.data.documents.wiki_en_held_out`, those
    minilm-mlm is measured on), whether or not wiki-en is among the training corpora.
    """
    from ..data.corpora import load_corpus
    from ..data.documents import document_sequences, held_out_split, wiki_en_held_out

    train_sequences = []
    for spec in (c.strip() for c in cfg.corpus.split(",") if c.strip()):
        with as_user_error(f"--corpus {spec}", ValueError):
            documents = task_documents(spec[len("task:"):]) if spec.startswith("task:") else list(load_corpus(spec))
        if spec == "wiki-en":
            documents = held_out_split(documents)[0]
        train_sequences.extend(document_sequences(documents, tokenizer, cfg.max_seq_length))
    held_out = document_sequences(wiki_en_held_out(), tokenizer, cfg.max_seq_length)[: cfg.max_eval_sequences]
    return train_sequences, held_out


def task_documents(name: str) -> list[list[str]]:
    """An embedded task's training inputs as documents of one or two sentences, labels dropped:
    a tagged sentence's words joined by spaces, a pair's two sentences, a QA example's question
    and context. Only the training split: the dev and test inputs stay unseen."""
    from ..data.formats import QAExample, TaggingExample
    from ..data.task_data import EMBEDDED_TASKS, load_task

    if name not in EMBEDDED_TASKS:
        raise ValueError(f"task:{name}: not an embedded task ({', '.join(EMBEDDED_TASKS)})")
    documents = []
    for example in load_task(name).train:
        if isinstance(example, TaggingExample):
            documents.append([" ".join(example.tokens)])
        elif isinstance(example, QAExample):
            documents.append([example.question, example.context])
        else:
            documents.append([t for t in (example.text_a, example.text_b) if t])
    return documents


def make_collate(cfg: DistillConfig, tokenizer):
    """collate(sequences, generator) -> batch: padded ids, attention mask, and masks and labels
    when the losses need them (their draws from `generator`, which the loop seeds per batch)."""
    from ..data.documents import make_batch

    def collate(sequences, generator: torch.Generator) -> dict:
        ids, attention_mask, labels = make_batch(sequences, tokenizer, generator,
                                                 mlm_probability=0.15 if cfg.masks_input else 0.0)
        batch = {"input_ids": ids, "attention_mask": attention_mask}
        if cfg.masks_input:
            batch["labels"] = labels
        return batch

    return collate


# ---- the command -------------------------------------------------------------------------


def run_identity(cfg: DistillConfig) -> dict:
    """identity.json of a distillation run: its settings, the corpora's identity (a file's
    sha256) and that of the teacher's and the initial student's vocabularies."""
    from .runfolder import job_identity, source_identity, vocab_identity

    data = {f"corpus:{c.strip()}": source_identity(c.strip()) for c in cfg.corpus.split(",") if c.strip()}
    inputs = {"teacher": vocab_identity(cfg.teacher), "init_student": vocab_identity(cfg.init_student)}
    return job_identity("distill", cfg, data, {k: v for k, v in inputs.items() if v})


# What a start writes before its first checkpoint (removed when a fresh run with other settings finds it).
RUN_LEFTOVERS = (VOCAB_NAME, RUN_NAME, "metrics.jsonl", "metrics.png")


def distill(cfg: DistillConfig, resume: bool = False) -> TrainResult:
    """Distil `cfg.teacher` into a student of `cfg.layers`; checkpoints and metrics in `cfg.out`.
    --out and --resume are checked before anything is written (`bertedu.training.runfolder`)."""
    from .runfolder import check_resumable, undone_if_refused

    if resume and is_main_process():
        check_resumable(cfg.out, "distill")
    with undone_if_refused(cfg.out, RUN_LEFTOVERS) if is_main_process() else contextlib.nullcontext():
        return _distill(cfg, resume)


def _distill(cfg: DistillConfig, resume: bool) -> TrainResult:
    from ..data.tokenizer import copy_vocabulary, load_vocab_tokenizer
    from ..utils import resolve_precision
    from .curves import plot_metrics
    from .runfolder import check_run_folder, record_vocab, start_run_folder

    out = Path(cfg.out)
    identity = run_identity(cfg)
    plan = check_run_folder(out, identity, resume=resume) if is_main_process() else None
    if plan == "taken":
        raise SettingError(f"--out {out} already holds a run: pass --resume to continue it, or another --out")
    teacher, vocab = load_teacher(cfg.teacher)
    make_out_folder(out)
    if is_main_process():  # under torchrun, one writer; identity.json before any other file
        start_run_folder(out, identity, plan, leftovers=RUN_LEFTOVERS)
    if not resume:  # a resumed run reads the vocabulary it began with (identity.json checked it)
        copy_vocabulary(vocab, out / VOCAB_NAME)
    if is_main_process():
        (out / RUN_NAME).write_text(json.dumps(dataclasses.asdict(cfg), indent=2) + "\n", encoding="utf-8")
        if not resume:
            record_vocab(out)
    tokenizer = load_vocab_tokenizer(out / VOCAB_NAME, impl="fast")
    with stage(f"tokenising {cfg.corpus}", cfg.progress) as made:
        sequences, held_out = distillation_sequences(cfg, tokenizer)
        made.update({"training sequences": len(sequences), "held-out sequences": len(held_out)})

    seed_everything(cfg.seed)  # a fresh head's initialisation, when the teacher has none
    student = initial_student(cfg.init_student, vocab) if cfg.init_student else \
        student_from_teacher(teacher, cfg.layer_indices())
    model = DistillingStudent(student, teacher, cfg)
    train_cfg = cfg.train_config(precision=resolve_precision(cfg.precision, cfg.device), out=str(out),
                                 ddp_find_unused_parameters=True)  # the heads get no gradient
    result = train(model, sequences, make_collate(cfg, tokenizer), train_cfg, eval_dataset=held_out, resume=resume)
    if result.records and is_main_process():
        plot_metrics(result.records, out / "metrics.png")
    return result
