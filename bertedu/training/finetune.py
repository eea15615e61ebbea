"""Fine-tuning end to end: task -> tokenizer and model -> shared training loop -> metrics.

`bertedu finetune` (bertedu/cli.py) is a thin shell around `finetune()`; the fine-tuning
notebooks (one per task family) introduce it and call the pieces directly.
Devlin et al. 2019, section 4: "we simply plug in the task-specific inputs and outputs
into BERT and fine-tune all the parameters end-to-end."

    task   an embedded task (sentiment-zh, topic-en, ner-en, ner-zh, paraphrase-en, qa-cloze-en), a
           canonical one (sst2, mrpc, mnli, conll2003, squad) or a PATH (bertedu.data)
    init   "minilm": the real all-MiniLM-L6-v2 encoder and its 30,522-piece vocabulary;
           a `bertedu pretrain --out` folder: bertedu's own pretrained encoder and vocab;
           "random": no pretraining at all (`preset` size), the control that shows what
           pretraining buys

Each task family gets a `TaskIO` (bertedu.training.taskio) that turns examples into model inputs,
batches them, and turns model outputs back into predictions and metrics.

Early stopping: train() runs in chunks of `eval_every` steps (`stop_at_step`, then
`resume=True` from the checkpoint it wrote: the data order, learning-rate schedule and
RNG continue exactly, so chunking changes nothing). After each chunk the dev set is
scored; the best weights are kept in memory, and after `patience` evaluations without
improvement the run stops. The best weights are restored at the end, whether or not the
run stopped early (model selection on dev, as the paper picks the best epoch on dev).

Everything lands in one folder `out`:

    identity.json                    written first: the run's kind, settings, task data and vocabulary
                                     (bertedu.training.runfolder), checked by --resume and --overwrite
    vocab.txt                        the vocabulary the model reads
    checkpoint-<step>/               the last training checkpoint (train())
    metrics.jsonl, metrics.png       training loss and the dev evaluations (eval_*)
    best/                            while training: the best weights so far (for --resume)
    model/                           the best weights: model.safetensors, config.json, task.json,
                                     manifest.json (their sha256, checked when loaded)
    predictions_dev.jsonl, predictions_test.jsonl   {"id", "prediction", "gold"} per example
    results.json                     settings, dev and test metrics, the evaluations (written
                                     last: a folder with it holds a finished run)

Every file is written atomically (a temporary file renamed into place). A folder that
holds a finished run is not written into again unless `overwrite`; an interrupted run
(SIGINT / SIGTERM: a checkpoint, no results.json) continues with `resume=True`
(`--resume`), bit for bit as if never stopped.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import os
import shutil
import time
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from .checkpoint import (
    latest_checkpoint,
    list_checkpoints,
    load_weights,
    load_weights_into_new,
    open_atomic,
    read_config,
    save_weights,
)
from .progress import stage
from ..model.config import PRESETS, BertConfig
from ..model.constants import VOCAB_NAME
from ..family.distillation import detach_task_teacher, learn_from_teacher
from ..pretrained import MASKED_LMS
from ..errors import MissingFileError, OutputFolderError, SettingError, as_user_error
from .jobs import TrainingInterrupted, make_out_folder, run_lock, stop_signals
from .runfolder import check_resumable, check_run_folder, record_vocab, start_run_folder, undone_if_refused
from .taskio import QAIO, ClassificationIO, TaggingIO, TaskIO, predict, task_io  # noqa: F401 (re-exported)
from ..model.tasks import (
    TAGGING_HEADS,
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    freeze_encoder,
    set_dropout,
)
from ..data.tokenizer import copy_vocabulary, load_vocab_tokenizer
from .loop import TrainConfig
from ..utils import resolve_precision, seed_everything, setting

log = logging.getLogger(__name__)
MODEL_DIR = "model"
BEST_DIR = "best"
TASK_INFO_NAME = "task.json"
RESULTS_NAME = "results.json"
INITS = ("minilm", "random", *MASKED_LMS)  # or a `bertedu pretrain --out` folder
CRF_LR = 1e-2  # --head crf: the transition scores' peak learning rate (FinetuneConfig.crf_lr's help says why)


@dataclass(frozen=True)
class FinetuneConfig(TrainConfig):
    """The settings of one fine-tuning run; each field is a `bertedu finetune` flag.

    A `TrainConfig` (the loop's settings, with fine-tuning's defaults below) plus the task,
    where the encoder comes from, the inputs and early stopping.
    Learning rate: the paper's grid for BERT-BASE is batch 16/32, lr 5e-5/3e-5/2e-5,
    2-4 epochs, warm-up over the first 10% of steps. `lr=None` picks 5e-5 for a pretrained
    encoder, 1e-4 for a random one (nothing to preserve, and small models take larger
    steps) and 1e-3 with a frozen encoder (only the small head learns).
    """

    task: Optional[str] = setting(None, "what to fine-tune on: an embedded task (offline), a canonical one "
                                        "(Hugging Face datasets, needs a network the first time), or a PATH to "
                                        "GLUE .tsv / CoNLL / SQuAD .json files (a folder with train/dev/test "
                                        "files, or one file)")
    init: str = setting("minilm", "where the encoder comes from: minilm (the real all-MiniLM-L6-v2 weights and "
                                  "vocabulary), a masked LM shipped with the course (minilm-mlm), a `bertedu "
                                  "pretrain --out` folder (its latest checkpoint and vocab.txt), or random (no "
                                  "pretraining: the control)")
    preset: str = setting("mini", f"model size for --init random: {', '.join(PRESETS)} (mini is the size "
                                  "`bertedu pretrain` trains by default)")
    vocab: Optional[str] = setting(None, "vocab.txt for --init random, or the name of a model whose vocabulary "
                                         "to use (minilm, or a shipped masked LM such as course-zh: a random "
                                         "twin of it); None: MiniLM's 30,522 pieces for English, for Chinese one "
                                         "token per character of the task's training text")
    # inputs
    max_seq_length: Optional[int] = setting(None, "tokens per input, specials included; longer inputs are "
                                                  "truncated, QA contexts cut into windows (None: 128; 384 for QA)")
    doc_stride: int = setting(128, "QA: context tokens between the starts of two consecutive windows")
    max_query_length: int = setting(64, "QA: question pieces kept")
    max_answer_length: int = setting(30, "QA: longest answer span, in tokens")
    segment_ids: bool = setting(True, "sentence pairs: segment id 1 for the second text, as BERT (--no-segment-ids: "
                                      "every token in segment 0, so only [SEP] marks where the first text ends, "
                                      "as in RoBERTa and DistilBERT)")
    # a user's own table (CSV, TSV, JSON Lines): which columns hold what
    text_column: Optional[str] = setting(None, "--task PATH: the column of the text (None: the first of sentence, "
                                               "text, review, sentence1, text_a, premise, question1, content)")
    text_pair_column: Optional[str] = setting(None, "--task PATH: the column of a pair's second text (None: "
                                                    "sentence2, text_b, text_pair, hypothesis or question2 if "
                                                    "there is one; else single sentences)")
    label_column: Optional[str] = setting(None, "--task PATH: the column of the label (None: label, labels, "
                                                "gold_label, sentiment, class or category)")
    # data
    max_train: Optional[int] = setting(None, "use at most N training examples (a seeded subsample, for quick "
                                             "CPU runs)")
    max_eval: Optional[int] = setting(None, "use at most N examples of each of dev and test (a seeded subsample)")
    data_seed: int = setting(0, "seed of the task's train/dev/test split and of the subsamples; keep it fixed "
                                "to compare runs")
    # early stopping and feature-based use
    patience: Optional[int] = setting(None, "early stopping: stop after N dev evaluations without improvement "
                                            "(None: never)")
    freeze_encoder: bool = setting(False, "feature-based use: train the head only, on a frozen encoder (with "
                                          "mean pooling for classification, as sentence-BERT)")
    freeze_layers: int = setting(0, "train the top of the encoder only: freeze the embeddings and the lowest N "
                                    "encoder layers (no gradients, left out of the optimizer), any task; at most "
                                    "the encoder's layer count (0: nothing frozen). Half the layers frozen "
                                    "forgets least and learns less: test -0.014 on topic-en from minilm-mlm, "
                                    "-0.064 on ner-zh from course-zh, held-out masked-token accuracy +0.064 and "
                                    "+0.136 (docs/finetuning.md, 'Warm-up, layer-wise decay and freezing')")
    layer_lr_decay: float = setting(1.0, "layer-wise learning-rate decay D in (0, 1] (ELECTRA; Sun et al. 2019): "
                                         "of L encoder layers numbered 1..L from the bottom, layer l gets --lr "
                                         "times D^(L-l) (the top layer --lr itself), the embeddings --lr times D^L; "
                                         "the head and pooler (and a CRF its --crf-lr) keep their rates (1: one "
                                         "rate for the whole encoder). At 0.8 both measured tasks forget less "
                                         "(masked-token accuracy +0.030, +0.021) and their scores go opposite "
                                         "ways (topic-en -0.014, ner-zh +0.050), so 1 stays the default "
                                         "(docs/finetuning.md, 'Warm-up, layer-wise decay and freezing')")
    pooling: Optional[str] = setting(None, "classification: pooler (BERT's tanh(dense([CLS]))) or mean (of "
                                           "the real tokens) (None: mean with --freeze-encoder, else pooler)")
    dropout: Optional[float] = setting(None, "dropout rate of the whole model: the hidden states', the "
                                             "attention probabilities' and the head's (None: the encoder's "
                                             "own, 0.1 for every model here; 0: none, and a cheaper step). On a "
                                             "small training set 0 against 0.1 made no measurable difference to "
                                             "the test score and 0.3 cost 0.23-0.24 (docs/finetuning.md, 'Dropout "
                                             "and weight decay on a small training set')")
    head: str = setting("softmax", "tagging: softmax (each word's tag on its own, BERT's head) or crf (BERT+CRF: a "
                                   "linear-chain CRF over the words, its transition scores trained with the "
                                   "encoder; Viterbi decoding that never writes I-X after anything but B-X or I-X)")
    crf_lr: Optional[float] = setting(None, f"--head crf: peak learning rate of the CRF's transition scores (None: "
                                            f"{CRF_LR:g}). They start at 0 and must grow to the size of the "
                                            "emission scores, a few units, within a few hundred steps; AdamW "
                                            "moves a parameter by about its learning rate per step, so at the "
                                            "encoder's 5e-5 (0.025 in 500 steps) they would stay near 0")
    # the loop's settings, with fine-tuning's defaults (a budget of `steps` wins over `epochs`)
    out: str = setting("runs/finetune", "output folder: vocab.txt, checkpoint-<step>/, metrics.jsonl, "
                                        "metrics.png, model/ (the best weights), predictions_dev.jsonl, "
                                        "predictions_test.jsonl, results.json")
    epochs: Optional[float] = setting(3.0, "passes over the training set; the paper uses 2-4 (--steps wins)")
    lr: Optional[float] = setting(None, "peak learning rate of AdamW (None: 5e-5 from a pretrained encoder, "
                                        "the paper's grid being 5e-5/3e-5/2e-5 for runs of thousands of steps; "
                                        "1e-4 from random; 1e-3 with --freeze-encoder). Runs of 50-125 steps "
                                        "learn little at the paper's rates and most at 10-50 times them, paid for "
                                        "in what the encoder forgets (minilm-mlm on topic-en: test accuracy 0.629 "
                                        "at 2e-5, 0.913 at 5e-4, 0.484 at 2e-3; held-out masked-token accuracy "
                                        "0.379, 0.246, 0.013 against 0.383 before; docs/finetuning.md, 'Learning "
                                        "rate and forgetting')")
    warmup_ratio: Optional[float] = setting(0.1, "fraction of the steps spent warming the learning rate up, "
                                                 "before its linear decay to 0 (BERT's 0.1; against none at each "
                                                 "task's best rate, no measurable difference on topic-en or ner-zh: "
                                                 "docs/finetuning.md, 'Warm-up, layer-wise decay and freezing')")
    weight_decay: float = setting(0.01, "AdamW weight decay, never applied to biases and LayerNorm (BERT's 0.01; "
                                        "0.1 moved ner-zh's small-training-set scores by 0.001: decoupled decay "
                                        "shrinks a weight by lr x wd a step, under 1%% in a run of 125 steps; "
                                        "docs/finetuning.md, 'Dropout and weight decay on a small training set')")
    eval_every: int = setting(0, "score the dev set every N steps (0: once per epoch); the best weights are kept")
    precision: str = setting("auto", "auto (bf16 autocast on CUDA, fp32 on CPU), fp32 or bf16")
    overwrite: bool = setting(False, "replace the run in --out (finished or not): its checkpoints, model/, "
                                     "metrics, predictions and results are deleted first")
    teacher: Optional[str] = setting(None, "a finished `bertedu finetune --out` folder of the same task and "
                                           "vocabulary whose predictions this run also learns from (knowledge "
                                           "distillation while fine-tuning, TinyBERT's prediction-layer loss); "
                                           "classification and tagging tasks")
    soft_weight: float = setting(0.5, "with --teacher: weight of the soft-target loss, T^2 KL to the teacher's "
                                      "softened predictions; the labels' cross-entropy gets 1 minus it")
    temperature: float = setting(1.0, "with --teacher: softmax temperature of the soft targets")
    layer_weight: float = setting(0.0, "with --teacher: weight of TinyBERT's layer-wise loss added to the "
                                       "above (MSE of hidden states and attention maps, student layer m "
                                       "against teacher layer m * L_t / L_s; same width and heads); 0: off")

    def __post_init__(self) -> None:
        from ..data.task_data import TASKS

        super().__post_init__()
        if not self.task:
            raise ValueError(f"give a task: one of {', '.join(TASKS)}, or a PATH to data files")
        if self.task not in TASKS and not os.path.exists(os.path.expanduser(self.task)):
            raise ValueError(f"unknown task {self.task!r}: not one of {', '.join(TASKS)}, and no file or folder "
                             "by that name")
        if self.init not in INITS and not os.path.isdir(self.init):
            raise ValueError(f"init must be one of {', '.join(INITS)} or a `bertedu pretrain --out` folder; "
                             f"{self.init!r} is not a folder")
        if self.task in TASKS and (self.text_column or self.text_pair_column or self.label_column):
            raise ValueError("--text-column, --text-pair-column and --label-column name the columns of a file: "
                             f"they do not apply to --task {self.task}")
        if self.vocab is not None and self.init != "random":
            raise ValueError("vocab applies to init=random only: a pretrained encoder reads its own vocabulary")
        if self.preset not in PRESETS:
            raise ValueError(f"unknown preset {self.preset!r}; choose one of {', '.join(PRESETS)}")
        if self.max_seq_length is not None and not 8 <= self.max_seq_length <= 512:
            raise ValueError(f"max_seq_length must be in 8..512 (BERT has 512 positions), got {self.max_seq_length}")
        for name in ("doc_stride", "max_query_length", "max_answer_length", "max_train", "max_eval"):
            if getattr(self, name) is not None and getattr(self, name) < 1:
                raise ValueError(f"{name} must be at least 1, got {getattr(self, name)}")
        if self.patience is not None and self.patience < 1:
            raise ValueError(f"patience counts evaluations and must be at least 1 (or None), got {self.patience}")
        if self.pooling not in (None, "pooler", "mean"):
            raise ValueError(f"pooling must be 'pooler' or 'mean', got {self.pooling!r}")
        self._check_head()
        self._check_layers()
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ValueError(f"dropout must be in [0, 1) (0: none), got {self.dropout}")
        if not 0 <= self.soft_weight <= 1:
            raise ValueError(f"soft_weight must be between 0 and 1, got {self.soft_weight}")
        if self.temperature <= 0:
            raise ValueError(f"temperature must be positive, got {self.temperature}")
        if self.layer_weight < 0:
            raise ValueError(f"layer_weight must be 0 (off) or positive, got {self.layer_weight}")
        if self.teacher is not None and not os.path.isdir(self.teacher):
            raise ValueError(f"teacher must be a `bertedu finetune --out` folder; {self.teacher!r} is not a folder")

    def _check_head(self) -> None:
        if self.head not in TAGGING_HEADS:
            raise ValueError(f"head must be one of {', '.join(TAGGING_HEADS)}, got {self.head!r}")
        if self.crf_lr is not None and self.head != "crf":
            raise ValueError("--crf-lr is the learning rate of a CRF's transitions: it needs --head crf")
        if self.crf_lr is not None and not self.crf_lr > 0:
            raise ValueError(f"crf_lr must be positive, got {self.crf_lr}")
        if self.head == "crf" and self.teacher is not None:
            raise ValueError("--teacher teaches per-word tag distributions, which a CRF head does not have: "
                             "drop --teacher or use --head softmax")

    def _check_layers(self) -> None:
        if self.freeze_layers < 0:
            raise ValueError(f"freeze_layers counts encoder layers: 0 (none) or more, got {self.freeze_layers}")
        if self.freeze_layers and self.freeze_encoder:
            raise ValueError("--freeze-layers freezes the lowest layers, --freeze-encoder the whole encoder: give "
                             "one of them")
        if not 0 < self.layer_lr_decay <= 1:
            raise ValueError(f"layer_lr_decay must be in (0, 1] (1: no decay), got {self.layer_lr_decay}")
        if self.layer_lr_decay != 1 and self.freeze_encoder:
            raise ValueError("--layer-lr-decay sets the encoder layers' learning rates, and --freeze-encoder trains "
                             "none of them: drop one of the two")

    def resolved_crf_lr(self) -> Optional[float]:
        """The CRF's own peak learning rate (--head crf), None for a softmax head."""
        if self.head != "crf":
            return None
        return self.crf_lr if self.crf_lr is not None else CRF_LR

    def _check_lr(self) -> None:
        if self.lr is not None:  # None: resolved_lr() picks it from init and freeze_encoder
            super()._check_lr()

    def resolved_lr(self) -> float:
        if self.lr is not None:
            return self.lr
        if self.freeze_encoder:
            return 1e-3
        return 1e-4 if self.init == "random" else 5e-5

    def resolved_max_seq_length(self, kind: str) -> int:
        return self.max_seq_length or (384 if kind == "qa" else 128)


# ----------------------------------------------------------------------------------------
# Models and vocabularies
# ----------------------------------------------------------------------------------------


def _check_init(cfg: FinetuneConfig) -> None:
    """Fail before any work when --init names a folder that holds no pretraining run."""
    if cfg.init in INITS:
        return
    folder = Path(cfg.init)
    if latest_checkpoint(folder) is None:
        raise MissingFileError(f"--init {folder}: no checkpoint-<step> folder in it. Pass a `bertedu pretrain "
                               "--out` folder that finished at least one checkpoint, or minilm, or random.")
    if not (folder / VOCAB_NAME).is_file():
        raise MissingFileError(f"--init {folder}: no {VOCAB_NAME}; the model cannot read text without it")


def _random_init_vocab(cfg: FinetuneConfig, task, out: Path) -> Path:
    """The vocabulary for a randomly initialised model (copied or built into out/vocab.txt)."""
    from ..pretrained import minilm_vocab_path

    if cfg.vocab:
        from ..pretrained import MASKED_LMS, masked_lm_vocab_path

        if cfg.vocab == "minilm":
            return minilm_vocab_path()
        return masked_lm_vocab_path(cfg.vocab) if cfg.vocab in MASKED_LMS else Path(cfg.vocab)
    if task.language != "zh":
        return minilm_vocab_path()
    # Chinese: one token per character of the training text (Chinese BERT's choice).
    from ..data.vocab import build_char_vocab

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
    make_out_folder(out)
    encoder = None
    if cfg.init == "minilm":
        from ..interop import load_minilm
        from ..pretrained import minilm_vocab_path

        encoder, vocab = load_minilm(), minilm_vocab_path()
    elif cfg.init == "random":
        vocab = _random_init_vocab(cfg, task, out)
    elif cfg.init in MASKED_LMS:  # a masked LM shipped with the course: its encoder
        from ..pretrained import load_masked_lm, masked_lm_vocab_path

        encoder, vocab = load_masked_lm(cfg.init)[0].bert, masked_lm_vocab_path(cfg.init)
    else:
        from .pretrain import load_pretrained

        encoder, _ = load_pretrained(cfg.init)
        encoder, vocab = encoder.bert, Path(cfg.init) / VOCAB_NAME
    if Path(vocab).resolve() != (out / VOCAB_NAME).resolve():
        with as_user_error(f"--vocab {vocab}", FileNotFoundError):
            copy_vocabulary(vocab, out / VOCAB_NAME)  # and merges.txt, for a byte-level BPE vocabulary
    with as_user_error(f"the vocabulary {vocab}", ValueError):  # [MASK] missing, a token twice, empty
        tokenizer = load_vocab_tokenizer(out / VOCAB_NAME, impl="fast")

    config = encoder.config if encoder is not None else BertConfig.preset(cfg.preset, vocab_size=len(tokenizer))
    if config.vocab_size != len(tokenizer):
        raise SettingError(f"the encoder has {config.vocab_size} token embeddings but {vocab} has {len(tokenizer)} "
                         "tokens: they must come from the same pretraining run")
    length = cfg.resolved_max_seq_length(task.kind)
    if length > config.max_position_embeddings:
        raise SettingError(f"max_seq_length {length} is beyond the model's {config.max_position_embeddings} "
                           f"positions: use --max-seq-length {config.max_position_embeddings} or less")
    if cfg.freeze_layers > config.num_hidden_layers:
        raise SettingError(f"--freeze-layers {cfg.freeze_layers}: the encoder has {config.num_hidden_layers} "
                           f"layers; freeze at most {config.num_hidden_layers} (or use --freeze-encoder)")

    if cfg.init not in ("minilm", "random"):  # a course model or a run: was it trained this long?
        from ..pretrained import length_warning, trained_length

        trained = trained_length(cfg.init)
        message = length_warning(f"--init {cfg.init}", length, trained)
        if message:
            warnings.warn(f"{message}; pass --max-seq-length {trained} to stay within them")
    seed_everything(cfg.seed)  # the head's initialisation (and a random encoder's)
    head_kwargs = _head_kwargs(cfg, task)
    cls = _HEADS[task.kind]
    model = cls.from_encoder(encoder, **head_kwargs) if encoder is not None else cls(config, **head_kwargs)
    if cfg.freeze_encoder:
        freeze_encoder(model)
    freeze_lower_layers(model, cfg.freeze_layers)
    if cfg.dropout is not None:
        set_dropout(model, cfg.dropout)
    return model.train(), tokenizer


def freeze_lower_layers(model, n: int) -> int:
    """Freeze the bottom of a task model's encoder: with `n` >= 1 the embeddings and the
    lowest `n` encoder layers (model.bert.layers[:n]) get requires_grad False, so they get no
    gradients and `param_groups` leaves them out of the optimizer (no update, no weight
    decay); `n` = 0 freezes nothing. Dropout still runs in them while training (unlike
    `freeze_encoder`, which puts the whole encoder in eval mode). Returns the number of
    parameters frozen. The lower layers hold the more general features, the reason ULMFiT
    (Howard and Ruder 2018) and Sun et al. 2019 give them smaller steps: here, none."""
    if n < 0 or n > len(model.bert.layers):
        raise ValueError(f"freeze_lower_layers: n must be in 0..{len(model.bert.layers)}, got {n}")
    parts = [model.bert.embeddings, *model.bert.layers[:n]] if n else []
    for part in parts:
        part.requires_grad_(False)
    return sum(p.numel() for part in parts for p in part.parameters())


def layerwise_lrs(num_layers: int, lr: float, decay: float, prefix: str = "bert.") -> dict[str, float]:
    """Layer-wise learning-rate decay (Clark et al. 2020, ELECTRA; Sun et al. 2019, "How to
    fine-tune BERT for text classification?"): parameter-name prefix -> peak learning rate,
    for `train(peak_lrs=...)`.

    Encoder layers are numbered l = 1..L from the bottom (parameter names bert.layers.{l-1}.):
    layer l gets lr * decay**(L - l), so the top layer gets `lr` itself; the embeddings sit
    one step below layer 1 and get lr * decay**L. Everything not in the map (the task head,
    the pooler) keeps the config's lr. Every prefix ends with "." so that "bert.layers.1."
    never matches a parameter of bert.layers.10. The schedule's warm-up and decay then scale
    each rate (`set_learning_rates`). decay 1 returns {}: no extra groups, today's run.
    """
    if decay == 1:
        return {}
    lrs = {f"{prefix}embeddings.": lr * decay ** num_layers}
    for index in range(num_layers):  # index = l - 1
        lrs[f"{prefix}layers.{index}."] = lr * decay ** (num_layers - 1 - index)
    return lrs


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
    if task.kind == "tagging" and cfg.head == "crf":  # the tag names give the CRF its BIO constraints
        return {"num_labels": len(task.labels), "head": "crf", "label_names": list(task.labels)}
    if task.kind == "tagging":
        return {"num_labels": len(task.labels)}
    return {}


def _task_info(cfg: FinetuneConfig, task, io: TaskIO) -> dict:
    """What `load_finetuned` needs besides the weights (model/task.json): the head's arguments among them."""
    return {"task": task.name, "kind": task.kind, "labels": task.labels, "head": _head_kwargs(cfg, task),
            "max_seq_length": io.max_seq_length, "init": cfg.init,
            **({"null_threshold": io.null_threshold} if getattr(io, "version2", False) else {})}


def save_finetuned(model, out: str | os.PathLike, info: dict) -> Path:
    """Write out/model/ atomically: model.safetensors, config.json (BertConfig), task.json (`info`)."""
    return save_weights(Path(out) / MODEL_DIR, model, extra_json={TASK_INFO_NAME: info})


def load_finetuned(out: str | os.PathLike):
    """(model in eval mode, tokenizer, task info) from a `bertedu finetune --out` folder."""
    out = Path(out)
    folder = out / MODEL_DIR
    if not (folder / TASK_INFO_NAME).is_file():
        raise FileNotFoundError(f"{folder / TASK_INFO_NAME} is missing: is {out} a `bertedu finetune --out` "
                                "folder of a finished run?")
    info = json.loads((folder / TASK_INFO_NAME).read_text(encoding="utf-8"))
    config = BertConfig(**read_config(folder))
    model = load_weights_into_new(folder, lambda: _HEADS[info["kind"]](config, **info["head"]))  # no throw-away init
    return model.eval(), load_vocab_tokenizer(out / VOCAB_NAME, impl="fast"), info


def attach_task_teacher(model, teacher_run: str, task, vocab: Path, soft_weight: float, temperature: float,
                        layer_weight: float = 0.0) -> None:
    """Make `model` (a classification or tagging model being fine-tuned on `task`) learn from
    the fine-tuned model in `teacher_run` too. Refuses a teacher of another task, label set or
    vocabulary: its predictions would be about something else."""
    if isinstance(model, BertForQuestionAnswering):
        raise SettingError("--teacher: distillation while fine-tuning takes classification and tagging tasks, not QA")
    with as_user_error(f"--teacher {teacher_run}", FileNotFoundError):
        teacher, _, info = load_finetuned(teacher_run)
    if info["head"].get("head", "softmax") != "softmax":
        raise SettingError(f"--teacher {teacher_run} tags with a CRF, whose scores are no per-word tag "
                           "distributions to learn from: use a teacher fine-tuned with --head softmax")
    if info["task"] != task.name or list(info["labels"]) != list(task.labels):
        raise SettingError(f"--teacher {teacher_run} was fine-tuned on {info['task']} with labels "
                           f"{', '.join(info['labels'])}: the teacher must have done this task, {task.name}")
    if (Path(teacher_run) / VOCAB_NAME).read_bytes() != Path(vocab).read_bytes():
        raise SettingError(f"--teacher {teacher_run}: its vocabulary is not this model's, so they would read "
                           "different pieces")
    with as_user_error(f"--teacher {teacher_run} with --layer-weight", ValueError):
        learn_from_teacher(model, teacher, soft_weight, temperature, layer_weight)


# ----------------------------------------------------------------------------------------
# The run
# ----------------------------------------------------------------------------------------


def _write_predictions(path: Path, examples, predictions, io: TaskIO, with_gold: bool) -> None:
    """One JSON line per example: its id, input (the text, a pair's two texts, the words, or the
    question and context), prediction, gold and scores (`taskio.Predictions.scores`)."""
    scores = getattr(predictions, "scores", None) or [None] * len(predictions)
    with open_atomic(path) as f:
        for i, (e, p, score) in enumerate(zip(examples, predictions, scores)):
            if hasattr(e, "question"):
                given = {"question": e.question, "context": e.context}
            elif hasattr(e, "tokens"):
                given = {"words": list(e.tokens)}
            else:
                given = {"text": e.text_a, **({"text_pair": e.text_b} if e.text_b is not None else {})}
            row = {"id": e.id or str(i), "input": given, "prediction": p, "gold": io.gold(e) if with_gold else None,
                   "scores": score}
            f.write(json.dumps(row, ensure_ascii=False) + "\n")


def train_with_early_stopping(model, io: TaskIO, train_items: list, dev: list, dev_items: list, train_cfg,
                              eval_every: int = 0, patience: Optional[int] = None, progress: bool = False,
                              resume: bool = False, peak_lrs: Optional[dict[str, float]] = None):
    """Run `train()` in chunks of `eval_every` steps (0: one epoch), scoring `dev` after each.

    Each chunk ends with `stop_at_step` and a checkpoint in train_cfg.out; the next
    resumes from it, so the data order, schedule and RNG go on exactly as in one run.
    The run stops when the budget is spent, or after `patience` evaluations in a row
    without a strictly better dev score (io.main_metric). Returns (best, evaluations,
    stopped_early): best = {"score", "step", "state" (a copy of the weights), "preds",
    "metrics"}; evaluations = [{"step", "loss", metric: value}] (also appended to
    metrics.jsonl as eval_* records). The model is left with the last weights.

    The best weights so far are also written to out/best/, so that `resume` (after
    SIGINT / SIGTERM: TrainingInterrupted, raised here too when a signal comes while dev
    is scored) picks up the evaluations from metrics.jsonl and the best from out/best/.
    peak_lrs: parameter-name prefix -> its own peak learning rate (the CRF's, "crf."; each encoder
    layer's under --layer-lr-decay, `layerwise_lrs`), as `train()` takes it.
    """
    with stop_signals() as stop:
        return _train_with_early_stopping(model, io, train_items, dev, dev_items, train_cfg, eval_every, patience,
                                          progress, resume, stop, peak_lrs)


def _train_with_early_stopping(model, io, train_items, dev, dev_items, train_cfg, eval_every, patience, progress,
                               resume, stop, peak_lrs):
    from .loop import append_metrics, train

    steps_per_epoch = len(train_items) // train_cfg.batch_size  # one process: dev scoring is not distributed
    every = eval_every or max(1, steps_per_epoch)
    evaluations, best, bad, step = [], None, 0, 0
    if resume:
        evaluations, best, bad = _restore_evaluations(model, io, dev, dev_items, train_cfg)
        step = evaluations[-1]["step"] if evaluations else 0
        if patience is not None and bad >= patience:
            return best, evaluations, True  # it had stopped early; only the outputs were missing
    while True:
        result = train(model, train_items, io.collate, train_cfg, resume=resume or step > 0,
                       stop_at_step=step + every, peak_lrs=peak_lrs)
        if result.step == step and evaluations:  # resumed after the last evaluation: nothing left to train
            return best, evaluations, False
        step = result.step
        with stage(f"scoring dev at step {step}", progress) as made:
            dev_preds, dev_loss = predict(model, io, dev, train_cfg.batch_size, dev_items, train_cfg.precision)
            made["examples"] = len(dev)
        metrics = io.score(dev, dev_preds)
        evaluation = {"step": step, "loss": dev_loss,
                      **{k: v for k, v in metrics.items() if isinstance(v, (int, float))}}
        evaluations.append(evaluation)
        score = metrics[io.main_metric]
        improved = best is None or score > best["score"]  # an equal score is no improvement
        if improved:  # a copy: training goes on changing the model's own tensors
            state = {k: v.detach().clone() for k, v in model.state_dict().items()}
            best, bad = {"score": score, "step": step, "state": state, "preds": dev_preds, "metrics": metrics}, 0
            if train_cfg.out:  # before the evaluation is logged: a resume trusts what the log says
                save_weights(Path(train_cfg.out) / BEST_DIR, model, extra_json={"best.json": {"step": step}})
        else:
            bad += 1
        append_metrics(train_cfg.out,
                       {"step": step, **{f"eval_{k}": v for k, v in evaluation.items() if k != "step"}})
        if progress:
            print(f"step {step}: dev {io.main_metric} {score:.4f}"
                  + (" (best)" if improved else f" ({bad} without improvement)"), flush=True)
        if result.stopped_by != "stop_at_step":
            return best, evaluations, False  # the budget is spent
        if patience is not None and bad >= patience:
            log.info("early stop at step %d: no dev improvement in %d evaluations", step, bad)
            return best, evaluations, True
        if stop.signum:  # came while dev was scored: the checkpoint of this step is written
            raise TrainingInterrupted(stop.signum, step, result.checkpoint)


def _restore_evaluations(model, io: TaskIO, dev: list, dev_items: list, train_cfg):
    """(evaluations, best, evaluations without improvement) of an interrupted run, from
    out/metrics.jsonl's eval_* records and the weights in out/best/ (the model's own weights
    are put back as they were: train() loads the checkpoint's next)."""
    from .loop import read_metrics

    out = Path(train_cfg.out)
    records = read_metrics(out) if (out / "metrics.jsonl").exists() else []
    checkpoints = list_checkpoints(out)
    last_step = int(checkpoints[-1].name.split("-")[1]) if checkpoints else 0
    evaluations = [{"step": r["step"], **{k[len("eval_"):]: v for k, v in r.items() if k.startswith("eval_")}}
                   for r in records if any(k.startswith("eval_") for k in r) and r["step"] <= last_step]
    best, bad, best_step, best_score = None, 0, None, None
    for evaluation in evaluations:  # replay the early-stopping decisions
        if best_step is None or evaluation[io.main_metric] > best_score:
            best_step, best_score, bad = evaluation["step"], evaluation[io.main_metric], 0
        else:
            bad += 1
    if best_step is None:
        return [], None, 0
    saved = json.loads((out / BEST_DIR / "best.json").read_text()) if (out / BEST_DIR / "best.json").is_file() else {}
    if saved.get("step") != best_step:
        raise MissingFileError(f"{out / BEST_DIR} does not hold the best weights of step {best_step} (found "
                               f"{saved.get('step')}): this run cannot be resumed exactly; use --overwrite")
    current = {k: v.detach().clone() for k, v in model.state_dict().items()}
    load_weights(out / BEST_DIR, model)
    state = {k: v.detach().clone() for k, v in model.state_dict().items()}
    preds, _ = predict(model, io, dev, train_cfg.batch_size, dev_items, train_cfg.precision)
    model.load_state_dict(current)
    best = {"score": best_score, "step": best_step, "state": state, "preds": preds, "metrics": io.score(dev, preds)}
    return evaluations, best, bad


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


def finetune(cfg: FinetuneConfig, resume: bool = False) -> dict:
    """Fine-tune as `cfg` says; returns (and writes to out/results.json) the results:

    {"task", "kind", "init", "dev": metrics, "test": metrics or None, "extra", "note",
     "best_step", "steps", "stopped_early", "evaluations": [{"step", "loss", metrics}],
     "train_examples", "train_features", "dev_examples", "test_examples", "lr", "crf_lr"
     (--head crf: the CRF's peak learning rate; else None), "elapsed_s", "config" (every setting,
     freeze_layers and layer_lr_decay among them)}

    dev/test metrics: classification {accuracy, f1} and tagging {precision, recall, f1,
    per_type} are fractions, QA {exact_match, f1} percentages; tagging's also hold "errors",
    counts of invalid BIO and of wrong entities by kind (`bertedu.training.metrics.tagging_errors`).
    Where the test split has no labels (GLUE) or is missing, "test" is None and "note" says
    so; "extra" scores further labelled evaluation splits (MNLI's dev_mismatched). One
    process (not torchrun).

    resume: continue the interrupted run in cfg.out (same settings). The run holds
    out/.lock throughout (bertedu.training.jobs.run_lock); a user's mistake raises a UserError.
    """
    processes = int(os.environ.get("WORLD_SIZE", "1"))
    if processes > 1:  # every rank would score and write, and the dev schedule assumes one process
        raise SettingError(f"finetune runs in one process, but torchrun started {processes}: "
                           "run it as 'bertedu finetune ...' (with --device cuda:0 on a GPU machine)")
    if resume:
        check_resumable(cfg.out, "finetune")  # a missing folder: said before the lock creates it
    with run_lock(cfg.out), undone_if_refused(cfg.out, _RUN_OUTPUTS):
        return _finetune(cfg, resume)


# What a run writes into its folder, deleted by --overwrite (nothing else there is touched).
_RUN_OUTPUTS = (MODEL_DIR, BEST_DIR, RESULTS_NAME, VOCAB_NAME, "metrics.jsonl", "metrics.png", "identity.json")


def run_identity(cfg: FinetuneConfig) -> dict:
    """identity.json of a fine-tuning run: its settings, the task's identity (a PATH's sha256)
    and that of the vocabularies it reads (--init or --vocab, --teacher's)."""
    from .runfolder import job_identity, source_identity, vocab_identity

    inputs = {"init": vocab_identity(cfg.init) if cfg.init not in INITS else None,
              "vocab": vocab_identity(cfg.vocab), "teacher": vocab_identity(cfg.teacher)}
    return job_identity("finetune", cfg, {"task": source_identity(cfg.task)}, {k: v for k, v in inputs.items() if v})


def _check_out(cfg: FinetuneConfig, out: Path, resume: bool, identity: dict) -> str:
    """Refuse a folder that holds a run, unless resuming an unfinished one of these settings or
    overwriting a fine-tuning run (`bertedu.training.runfolder`); returns the folder's plan."""
    if resume and cfg.overwrite:
        raise SettingError("--resume continues the run in --out, --overwrite deletes it: give one of them")
    plan = check_run_folder(out, identity, resume=resume, overwrite=cfg.overwrite)
    finished = (out / RESULTS_NAME).is_file()
    started = finished or latest_checkpoint(out) is not None
    if cfg.overwrite and started:
        for path in [*list_checkpoints(out), *out.glob("predictions_*.jsonl"), *(out / n for n in _RUN_OUTPUTS)]:
            if path.is_dir():
                shutil.rmtree(path)
            elif path.exists():
                path.unlink()
    elif finished:
        raise OutputFolderError(f"{out} holds a finished fine-tuning run ({RESULTS_NAME}): choose another --out, "
                                "or pass --overwrite to replace it")
    elif started and not resume:
        raise OutputFolderError(f"{out} holds an unfinished fine-tuning run ({latest_checkpoint(out).name}): pass "
                                "--resume to continue it, --overwrite to start afresh, or choose another --out")
    return plan


def _load_task_data(cfg: FinetuneConfig):
    """The run's task (its columns, subsampled as asked), which must have train and dev splits."""
    from ..data.task_data import load_task

    columns = {k: getattr(cfg, k) for k in ("text_column", "text_pair_column", "label_column") if getattr(cfg, k)}
    task = load_task(cfg.task, seed=cfg.data_seed, **columns)
    if cfg.max_train is not None or cfg.max_eval is not None:
        task = task.subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    if not task.train or not task.dev:
        raise SettingError(f"{task.name} needs a train and a dev split to fine-tune and select on; got {task.summary()}")
    if cfg.head != "softmax" and task.kind != "tagging":
        raise SettingError(f"--head {cfg.head} decodes tag sequences, for tagging tasks; {task.name} is a "
                           f"{task.kind} task: drop --head {cfg.head}")
    return task


def _warn_unreadable_task(task, tokenizer, init: str) -> None:
    """Say so before training when the vocabulary cannot read the task (`warn_if_unreadable`):
    an English task on a Chinese character vocabulary, or the other way round."""
    from ..data.vocab import task_texts, warn_if_unreadable

    warn_if_unreadable(task_texts(task.train), tokenizer, f"{task.name}'s training words", f"--init {init}'s",
                       ": it cannot read this task; pick an --init made for its language")


def _open_run(cfg: FinetuneConfig, out: Path, resume: bool):
    """Check --out, --init and the task before anything is written; then write out/identity.json
    (`bertedu.training.runfolder`) and return the task."""
    identity = run_identity(cfg)
    plan = _check_out(cfg, out, resume, identity)
    _check_init(cfg)
    task = _load_task_data(cfg)
    start_run_folder(out, identity, plan, leftovers=_RUN_OUTPUTS)  # identity.json before any other file
    return task


def _encode_splits(io: TaskIO, task, progress: bool) -> tuple[list, list]:
    """The training and dev splits as model inputs (tokenised, labels aligned), said on stderr."""
    with stage(f"tokenising {task.name}", progress) as made:
        train_items = io.encode(task.train, training=True)
        dev_items = io.encode(task.dev)
        made.update({"training examples": len(task.train), "dev examples": len(task.dev)})
    return train_items, dev_items


def _finetune(cfg: FinetuneConfig, resume: bool) -> dict:
    from .curves import plot_metrics

    start_time = time.perf_counter()
    out = Path(cfg.out)
    task = _open_run(cfg, out, resume)
    model, tokenizer = build_model(cfg, task, out)
    record_vocab(out)  # a resume checked it is the same: identity.json stays as it was
    if cfg.teacher is not None:
        attach_task_teacher(model, cfg.teacher, task, out / VOCAB_NAME, cfg.soft_weight, cfg.temperature,
                            cfg.layer_weight)
    if cfg.init != "random":  # a pretrained model's vocabulary, made for some other text
        _warn_unreadable_task(task, tokenizer, cfg.init)
    io = task_io(task, tokenizer, cfg)
    if not any(io.gold(e) for e in task.dev):
        raise SettingError(f"{task.name}'s dev split has no labels: the best weights are chosen on dev, so it needs them")

    train_items, dev_items = _encode_splits(io, task, cfg.progress)
    precision = resolve_precision(cfg.precision, cfg.device)
    train_cfg = cfg.train_config(
        lr=cfg.resolved_lr(), epochs=None if cfg.steps is not None else cfg.epochs, precision=precision,
        out=str(out), eval_every=0, save_every=0, keep_checkpoints=1,
    )
    crf_lr = cfg.resolved_crf_lr()  # the CRF's transitions get their own, higher rate
    peak_lrs = {**layerwise_lrs(len(model.bert.layers), train_cfg.lr, cfg.layer_lr_decay),
                **({"crf.": crf_lr} if crf_lr else {})}
    best, evaluations, stopped_early = train_with_early_stopping(model, io, train_items, task.dev, dev_items,
                                                                 train_cfg, cfg.eval_every, cfg.patience, cfg.progress,
                                                                 resume=resume, peak_lrs=peak_lrs or None)
    model.load_state_dict(best["state"])  # the best weights on dev, whatever came after
    if cfg.teacher is not None:
        detach_task_teacher(model)
    if getattr(io, "version2", False):  # SQuAD 2.0: the "no answer" threshold is chosen on dev
        predict(model, io, task.dev, cfg.batch_size, dev_items, precision)
        best["preds"] = io.choose_null_threshold(task.dev)
        best["metrics"] = io.score(task.dev, best["preds"])

    save_finetuned(model, out, _task_info(cfg, task, io))
    _write_predictions(out / "predictions_dev.jsonl", task.dev, best["preds"], io, with_gold=True)
    with stage("scoring test" + "".join(f" and {name}" for name in task.extra_splits), cfg.progress) as made:
        test_metrics, note, extra, extra_sizes = _score_other_splits(model, io, task, out, cfg.batch_size, precision)
        made["examples"] = len(task.test or []) + sum(len(e) for e in task.extra_splits.values())
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
        "lr": train_cfg.lr, "crf_lr": crf_lr, "elapsed_s": time.perf_counter() - start_time,
        "config": dataclasses.asdict(cfg),
    }
    shutil.rmtree(out / BEST_DIR, ignore_errors=True)  # model/ holds them now
    with open_atomic(out / RESULTS_NAME) as f:  # last: its presence says the run finished
        f.write(json.dumps(results, indent=2, ensure_ascii=False) + "\n")
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


PRETRAINED_ENV = "BERTEDU_PRETRAINED"  # names the pretraining run notebooks 08-11 fine-tune at gpu scale


def gpu_scale_init(environ=None) -> tuple[str, str]:
    """The `init` notebooks 08-11 fine-tune at gpu scale, and a sentence saying which it is.

    The folder named by $BERTEDU_PRETRAINED when it holds a finished pretraining run (a
    checkpoint-<step> folder and its vocab.txt: what `--init` reads; notebook 07 at gpu scale
    leaves one in runs/nb07/phase2); "minilm" otherwise. Introduced for notebooks 08-11 by
    docs/gpu_route.md (issue 52 item 1).
    """
    folder = (os.environ if environ is None else environ).get(PRETRAINED_ENV)
    if not folder:
        return "minilm", f"init: minilm (${PRETRAINED_ENV} is not set)"
    path = Path(folder)
    if path.is_dir() and latest_checkpoint(path) is not None and (path / VOCAB_NAME).is_file():
        return str(path), f"init: the pretraining run in {path.name} (${PRETRAINED_ENV})"
    return "minilm", f"init: minilm (${PRETRAINED_ENV}={path.name} holds no finished pretraining run)"
