"""Pictures of the architecture, drawn by code from a model's config.

The data plots of `viz.py` show what a model computed; these show what a model *is*: boxes
and arrows, labelled with the sizes of the config they are given, so a picture can never
disagree with the model beside it. They render offline with matplotlib alone, in
JupyterLab, on GitHub and in the slides, at `DPI` (150) and with every label inside its box
(`label_overflows` checks that; tests/test_diagrams.py runs it on every picture).

    you_are_here(notebook, config, kind)  the map that opens every lesson, drawn for the model it runs
    input_representation(...)   token + segment + position embeddings (Devlin et al. 2019, Figure 2)
    attention_flow(...)         queries, keys and values, scores, the mask, softmax, the weighted sum
    multihead_reshape(...)      (B, T, D) -> (B, N, T, Dh): how one projection becomes N heads (04)
    encoder_blocks(...)         the post-LayerNorm block with its residuals, beside pre-LayerNorm
    pretraining_heads(...)      the MLM head at masked positions and the NSP head on [CLS]
    position_rows_trained(...)  which position-embedding rows each pretraining phase trains (07)
    memory_split(...)           weights, gradients, Adam moments and activations of a step (07)
    continuation_labels(...)    a word cut into pieces, its continuation piece labelled -100 (09)
    task_heads(...)             where each fine-tuning head reads the encoder (the paper's Figure 4)
    padded_vs_packed(...)       the same sequences padded to a batch and packed into rows (12)
    checkpoint_to_head(...)     what from_pretrained loads, initialises and drops (13)
    family_differences(name)    RoBERTa, ALBERT or DistilBERT as what they change in BERT
    albert_factorised(...)      ALBERT's V x E then E x H embedding and its one looped layer (16)

A model is given as its config plus a `kind` (`KINDS`: "bert", "bert-mlm", "minilm",
"course-zh", "roberta", "albert", "distilbert", "gpt"); the kind says what the config cannot (which heads
the checkpoint has), and defaults from the config's class. `LESSON_MODELS` names the model
each lesson runs at CPU scale; `you_are_here(n, scale=SCALE)` without a config draws the one
lesson n runs at that scale (`lesson_model`).

Every function draws on a matplotlib Axes (made if not given) and returns it, labelled in the
learner's language: English, or Chinese after `i18n.use("zh")` (the Chinese edition's first cell;
`drawing.translate_labels`, table `labels_zh`). What every
picture shares (boxes, arrows, labels that fit, model names) lives in `drawing.py`; the
pictures of one mechanism each in `mechanisms.py`, re-exported here.
Introduced in notebook 00 (the map); each lesson opens with its own `you_are_here`.
"""

from __future__ import annotations

import json
from typing import Callable, Optional, Sequence

from ..model.config import BertConfig
from .drawing import (  # noqa: F401  (re-exported: lessons and tests reach them through diagrams)
    COLORS, DIM_ALPHA, DPI, HIGHLIGHT, KINDS, SMALLEST_FONT, VERBATIM, ModelKind, _arrow, _axes, _box, _figure,
    _fit_labels, _frame, in_learners_language, kind_of, label_overflows, model_name, model_sizes, translate_labels,
)
from .mechanisms import (  # noqa: F401  (re-exported: the lessons call diagrams.<picture>)
    checkpoint_to_head, continuation_labels, memory_split, multihead_reshape, pack_rows, padded_vs_packed,
    parameter_groups, position_rows_trained, training_memory,
)


def _shipped_config(name: str) -> BertConfig:
    """The config of a masked LM shipped in bertedu/weights (no weights read)."""
    from ..model.constants import FOLDER_MARK
    from ..pretrained import masked_lm_dir

    saved = json.loads((masked_lm_dir(name) / "config.json").read_text(encoding="utf-8"))
    return BertConfig(**{k: v for k, v in saved.items() if k not in FOLDER_MARK})


def _distilbert_student() -> BertConfig:
    """Notebook 18's student: all-MiniLM-L6-v2 with layers 0, 2, 4 and no segment table."""
    import dataclasses

    from ..family.distilbert import DistilBertConfig

    fields = {f.name: getattr(BertConfig.minilm(), f.name) for f in dataclasses.fields(BertConfig)}
    return DistilBertConfig(**{**fields, "num_hidden_layers": 3, "type_vocab_size": 0})


def _family_config(module: str, name: str, preset: str, **overrides) -> Callable[[], BertConfig]:
    """A maker of `bertedu.family.<module>.<name>.<preset>(**overrides)`, imported when called."""
    def make() -> BertConfig:
        import importlib

        return getattr(getattr(importlib.import_module(f"bertedu.family.{module}"), name), preset)(**overrides)
    return make


# The model each lesson runs at CPU scale: notebook -> (config maker, kind). The GPU scale of
# 07-12 runs BERT-BASE (or notebook 07's run): those lessons pass the config they run.
LESSON_MODELS: dict[int, tuple[Callable[[], BertConfig], str]] = {
    0: (BertConfig.base, "bert"),  # the course's subject: the map of BERT-BASE
    1: (BertConfig.minilm, "minilm"), 2: (BertConfig.minilm, "minilm"), 3: (BertConfig.minilm, "minilm"),
    4: (BertConfig.minilm, "minilm"),
    5: (BertConfig.base, "bert"),  # MLM + NSP examples over the 30,522-piece vocabulary
    6: (lambda: BertConfig.tiny(vocab_size=2000), "bert"),
    7: (BertConfig.tiny, "bert"),
    8: (BertConfig.minilm, "minilm"),
    9: (lambda: _shipped_config("course-zh"), "course-zh"),  # its CPU run fine-tunes course-zh on ner-zh
    10: (BertConfig.minilm, "minilm"), 11: (BertConfig.minilm, "minilm"),
    12: (BertConfig.tiny, "bert"),
    13: (BertConfig.minilm, "minilm"), 14: (BertConfig.minilm, "minilm"),
    15: (_family_config("roberta", "RobertaConfig", "base"), "roberta"),
    16: (_family_config("albert", "AlbertConfig", "base"), "albert"),
    17: (_family_config("gpt", "GPTConfig", "tiny", vocab_size=1000), "gpt"),  # its V_toy
    18: (_distilbert_student, "distilbert"),
    19: (lambda: _shipped_config("course-zh"), "course-zh"),
}


def lesson_model(notebook: int, scale: str = "cpu") -> tuple[BertConfig, str]:
    """(config, kind) of the model lesson `notebook` runs at `scale` (the notebook's SCALE):
    `LESSON_MODELS`; at "gpu", 07 and 12 run BERT-BASE (07 with the route's budget recipe, MLM
    only), and 08-11 fine-tune notebook 07's BERT-BASE run when $BERTEDU_PRETRAINED names one
    (`gpu_scale_init`), else MiniLM."""
    if notebook not in LESSON_MODELS:
        raise ValueError(f"no lesson {notebook}; the lessons are 0-{max(LESSON_MODELS)}")
    if scale not in ("cpu", "gpu"):
        raise ValueError(f"scale is 'cpu' or 'gpu', not {scale!r}")
    if scale == "gpu" and notebook == 12:
        return BertConfig.base(), "bert"
    if scale == "gpu" and notebook == 7:  # the route's budget recipe: masked LM only
        return BertConfig.base(), "bert-mlm"
    if scale == "gpu" and notebook in (8, 9, 10, 11):
        from ..training.finetune import gpu_scale_init

        return (BertConfig.minilm(), "minilm") if gpu_scale_init()[0] == "minilm" else (BertConfig.base(), "bert-mlm")
    make, kind = LESSON_MODELS[notebook]
    return make(), kind

# ---- the map -----------------------------------------------------------------------------

# Which boxes of the map each lesson is about.
LESSON_PIECES: dict[int, tuple[str, ...]] = {
    0: (), 1: ("tokens",), 2: ("embed",), 3: ("attn",), 4: ("attn", "ffn", "layers"),
    5: ("tokens", "pretrain"), 6: ("pretrain",), 7: ("layers", "pretrain"),
    8: ("tasks",), 9: ("tasks",), 10: ("tasks",), 11: ("tasks",),
    12: ("attn", "ffn", "pretrain"), 13: ("tokens", "layers", "tasks"), 14: ("tokens", "tasks"),
    15: ("tokens", "embed", "pretrain"), 16: ("embed", "layers", "pretrain"), 17: ("attn", "pretrain"),
    18: ("layers", "pretrain"), 19: ("tokens", "pretrain"),
}
LESSON_TITLES = {
    0: "the whole course", 1: "tokenization", 2: "embeddings", 3: "self-attention", 4: "the encoder",
    5: "pretraining data", 6: "pretraining", 7: "pretraining at scale", 8: "single-sentence classification",
    9: "token tagging", 10: "sentence pairs", 11: "extractive QA", 12: "speed", 13: "Hugging Face",
    14: "long inputs", 15: "RoBERTa", 16: "ALBERT", 17: "BERT vs GPT", 18: "DistilBERT",
    19: "Chinese whole-word masking",
}


def _map_labels(config: BertConfig, kind: str) -> dict[str, str]:
    """The map's labels for `config` drawn as `kind`."""
    spec = KINDS[kind]
    L, H, A, V = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.vocab_size)
    segments = {0: "token + position", 1: "token + position (+ one segment row, always 0)"}.get(
        config.type_vocab_size, "token + segment + position")
    embedding_size = getattr(config, "embedding_size", None)
    width = f"E = {embedding_size}, projected to H = {H}" if embedding_size else f"H = {H}"
    loop = (f"one layer,\nlooped\nL = {L} times\n(shared\nweights)" if spec.shared_layers
            else f"× L = {L}\nlayers,\nresidual +\nLayerNorm")
    return {
        "text": spec.text,
        "tokens": f"{spec.vocabulary} tokens: {spec.example}\n(V = {V:,})".lstrip(),
        "embed": f"embeddings: {segments}\n({width})",
        "attn": f"{'causal ' if spec.causal else ''}self-attention\n(A = {A} heads)",
        "ffn": f"feed-forward\n({H} → {config.intermediate_size} → {H})",
        "layers": loop,
        "pretrain": spec.pretraining,
        "tasks": "fine-tuning heads\nclass · tag · pair · QA",
    }


def map_boxes(config: BertConfig, kind: Optional[str] = None) -> dict[str, tuple]:
    """The map's boxes: name -> (x, y, width, height, label, colour kind), labels from `config`."""
    labels = _map_labels(config, kind_of(config, kind))
    places = {"text": (3.0, 0.4, 5.7, 0.5, "text"), "tokens": (3.0, 1.3, 5.7, 0.75, "tokens"),
              "embed": (3.0, 2.35, 5.7, 0.75, "embed"), "attn": (2.05, 3.5, 3.3, 0.7, "attn"),
              "ffn": (2.05, 4.45, 3.3, 0.7, "ffn"), "layers": (4.8, 3.97, 1.8, 1.75, "norm"),
              "pretrain": (1.55, 5.75, 2.9, 0.8, "head"), "tasks": (4.5, 5.75, 2.9, 0.8, "head")}
    return {name: (x, y, w, h, labels[name], colour) for name, (x, y, w, h, colour) in places.items()}


@in_learners_language
def you_are_here(notebook: int, config: Optional[BertConfig] = None, kind: Optional[str] = None, ax=None,
                 scale: str = "cpu"):
    """The map of the model lesson `notebook` runs (bottom to top: text, tokens, embeddings, L
    layers, heads), the lesson's pieces highlighted and the rest dimmed; every size from
    `config`, the heads and embeddings from `kind` (`KINDS`). Without a config, the model the
    lesson runs at `scale` (`lesson_model`). Notebook 0 shows the whole map, nothing dimmed."""
    if notebook not in LESSON_PIECES:
        raise ValueError(f"no lesson {notebook}; the lessons are 0-{max(LESSON_PIECES)}")
    if config is None:
        config, default_kind = lesson_model(notebook, scale)
        kind = kind or default_kind
    kind = kind_of(config, kind)
    ax = _axes(ax, figsize=(4.6, 5.0))
    _frame(ax, 6.0, 6.25, f"you are here: {notebook:02d} · {LESSON_TITLES[notebook]}\n"
           f"{model_name(config, kind)}: {model_sizes(config)}")
    pieces = LESSON_PIECES[notebook]
    for name, (x, y, w, h, label, colour) in map_boxes(config, kind).items():
        highlight = None if not pieces else name in pieces
        _box(ax, x, y, w, h, label, colour, highlight=highlight, fontsize=8, gid=f"map-{name}")
    for x, y0, y1 in ((3.0, 0.65, 0.92), (3.0, 1.68, 1.97), (2.05, 2.73, 3.15), (2.05, 3.85, 4.1)):
        _arrow(ax, (x, y0), (x, y1))
    _arrow(ax, (1.55, 4.8), (1.55, 5.35))
    _arrow(ax, (3.2, 4.8), (4.2, 5.35))
    return _fit_labels(ax)


# ---- the input ---------------------------------------------------------------------------

@in_learners_language
def input_representation(tokens: Sequence[str], token_type_ids: Sequence[int], ax=None):
    """BERT's input for one encoded text (Devlin et al. 2019, Figure 2): per token, the sum of
    its token embedding, its segment embedding (A or B) and its position embedding."""
    if len(tokens) != len(token_type_ids):
        raise ValueError(f"{len(tokens)} tokens but {len(token_type_ids)} segment ids: encode them together")
    n = len(tokens)
    ax = _axes(ax, figsize=(max(4.0, 0.75 * n + 1.6), 3.2))
    _frame(ax, 1.6 + 1.0 * n, 4.4)
    rows = (("input", 3.9, "plain", lambda i: tokens[i]),
            ("token", 2.9, "tokens", lambda i: f"E_{tokens[i]}"),
            ("segment", 1.9, "embed", lambda i: "E_A" if token_type_ids[i] == 0 else "E_B"),
            ("position", 0.9, "attn", lambda i: f"E_{i}"))
    for label, y, kind, text in rows:
        ax.text(1.25, y, label, ha="right", va="center", fontsize=8)
        for i in range(n):
            _box(ax, 1.9 + i, y, 0.9, 0.6, text(i), kind, fontsize=7 if len(text(i)) > 7 else 8, verbatim=True)
    for i in range(n):
        for y in (2.45, 1.45):
            ax.text(1.9 + i, y, "+", ha="center", va="center", fontsize=10)
    ax.text(1.25, 0.25, "sum, then LayerNorm and dropout → the encoder", ha="left", fontsize=8, style="italic")
    return _fit_labels(ax)


# ---- attention ---------------------------------------------------------------------------

@in_learners_language
def attention_flow(config: Optional[BertConfig] = None, causal: bool = False, ax=None):
    """One head of self-attention as a flow, shapes from `config`: the hidden states X give
    queries, keys and values; scores QKᵀ/√d_k; the mask (padding, or causal for GPT) sets
    scores to -inf; softmax over keys; the probabilities weight the values."""
    config = config or BertConfig.base()
    D, N, Dh = config.hidden_size, config.num_attention_heads, config.head_dim
    ax = _axes(ax, figsize=(7.4, 3.9))
    _frame(ax, 10.0, 5.0, f"one of N = {N} heads (d_k = D / N = {Dh})")
    _box(ax, 0.9, 2.5, 1.4, 0.8, f"X\n(T, {D})", "embed")
    for y, name in ((4.0, "Q"), (2.5, "K"), (1.0, "V")):
        _box(ax, 2.9, y, 1.4, 0.7, f"{name} = X W_{name}\n(T, {Dh})", "attn", fontsize=7.5)
        _arrow(ax, (1.6, 2.5), (2.2, y))
    _box(ax, 5.0, 3.25, 1.9, 0.8, "scores\nQ Kᵀ / √d_k  (T, T)", "attn", fontsize=7.5)
    mask = "causal mask:\nno key after\nthe query" if causal else "padding mask:\n-inf at [PAD]\nkeys"
    _box(ax, 5.0, 1.75, 1.9, 0.95, mask, "norm", fontsize=7.5)
    _box(ax, 7.05, 3.25, 1.5, 0.8, "softmax\nover keys", "attn", fontsize=7.5)
    _box(ax, 8.95, 2.1, 1.7, 0.9, f"probs · V\n(T, {Dh})\nconcat N heads,\n· W_O → (T, {D})", "attn", fontsize=7)
    _arrow(ax, (3.6, 4.0), (4.05, 3.4))
    _arrow(ax, (3.6, 2.5), (4.05, 3.1))
    _arrow(ax, (5.0, 2.23), (5.0, 2.85))
    _arrow(ax, (5.95, 3.25), (6.3, 3.25))
    _arrow(ax, (7.8, 3.25), (8.6, 2.55))
    _arrow(ax, (3.6, 1.0), (8.1, 1.95), rad=0.15)
    return _fit_labels(ax)


@in_learners_language
def encoder_blocks(config: Optional[BertConfig] = None, ax=None):
    """BERT's post-LayerNorm encoder layer (LayerNorm after each residual sum, as Vaswani et
    al. 2017 and Devlin et al. 2019) beside the pre-LayerNorm layer of GPT-2 and most later
    models (LayerNorm inside the branch, the residual path left clean)."""
    config = config or BertConfig.base()
    ax = _axes(ax, figsize=(6.8, 5.0))
    _frame(ax, 10.0, 7.0, f"one encoder layer, repeated L = {config.num_hidden_layers} times")
    for x0, post in ((2.5, True), (7.5, False)):
        ax.text(x0, 6.75, "post-LN (BERT)" if post else "pre-LN (GPT-2, later BERTs)", ha="center", fontsize=9,
                fontweight="bold")
        _encoder_column(ax, x0, post, config)
    return _fit_labels(ax)


def _encoder_column(ax, x: float, post: bool, config: BertConfig) -> None:
    """One column of `encoder_blocks`: the boxes bottom to top and the residual arrows."""
    H, F = config.hidden_size, config.intermediate_size
    steps = (["attention", "+", "LayerNorm", "feed-forward", "+", "LayerNorm"] if post
             else ["LayerNorm", "attention", "+", "LayerNorm", "feed-forward", "+"])
    labels = {"attention": f"multi-head attention ({config.num_attention_heads})",
              "feed-forward": f"feed-forward {H}→{F}→{H}", "LayerNorm": "LayerNorm", "+": "+"}
    kinds = {"attention": "attn", "feed-forward": "ffn", "LayerNorm": "norm", "+": "plain"}
    ys = [0.9 + 0.9 * i for i in range(len(steps))]
    ax.text(x, 0.2, f"x  (T, {H})", ha="center", fontsize=8)
    _arrow(ax, (x, 0.35), (x, ys[0] - 0.25))
    for i, (step, y) in enumerate(zip(steps, ys)):
        w = 0.55 if step == "+" else 3.2
        _box(ax, x, y, w, 0.5, labels[step], kinds[step], fontsize=7.5)
        if i + 1 < len(steps):
            _arrow(ax, (x, y + 0.25), (x, ys[i + 1] - 0.25))
    _arrow(ax, (x, ys[-1] + 0.25), (x, ys[-1] + 0.6))
    # residual paths: from the input of each sub-layer (before its LayerNorm in pre-LN) around to its "+"
    plus = [i for i, s in enumerate(steps) if s == "+"]
    # post-LN: the second sub-layer's input is the first LayerNorm's output; pre-LN: the first sum
    starts = [0, plus[0] + 2] if post else [0, plus[0] + 1]
    for start, end in zip(starts, plus):
        y0, y1 = ys[start] - 0.45, ys[end]
        side = x - 1.9
        ax.plot([x, side, side], [y0, y0, y1], color="#1f77b4", lw=1.2, zorder=1)
        _arrow(ax, (side, y1), (x - 0.3, y1), color="#1f77b4", lw=1.2)

# ---- heads -------------------------------------------------------------------------------

def _encoder_with_outputs(ax, tokens: Sequence[str], config: BertConfig, kind: Optional[str] = None,
                          y: float = 1.6) -> list[float]:
    """Tokens in a row, the encoder as one wide box above them (its name and sizes from
    `config`), one output arrow per token."""
    xs = [1.0 + 1.0 * i for i in range(len(tokens))]
    for x, t in zip(xs, tokens):
        _box(ax, x, 0.45, 0.92, 0.5, t, "tokens", fontsize=7.5, verbatim=True)
        _arrow(ax, (x, 0.72), (x, y - 0.45))
    width = xs[-1] - xs[0] + 1.0
    _box(ax, (xs[0] + xs[-1]) / 2, y, width, 0.8,
         f"{model_name(config, kind)} encoder\nembeddings + {model_sizes(config)}", "norm", fontsize=8)
    for x in xs:
        _arrow(ax, (x, y + 0.42), (x, y + 0.85))
    return xs


@in_learners_language
def pretraining_heads(config: Optional[BertConfig] = None, ax=None):
    """BertForPreTraining: the MLM head on every masked position (dense, GELU, LayerNorm, then a
    decoder tied to the word embeddings, V logits) and the NSP head on [CLS] (the pooler's
    dense + tanh, then 2 logits: IsNext / NotNext). Notebook 06."""
    config = config or BertConfig.base()
    tokens = ["[CLS]", "my", "dog", "[MASK]", "cute", "[SEP]", "he", "[MASK]", "play", "[SEP]"]
    ax = _axes(ax, figsize=(7.4, 3.8))
    _frame(ax, 11.0, 5.4)
    xs = _encoder_with_outputs(ax, tokens, config, "bert")
    _box(ax, xs[0] + 0.6, 3.25, 2.1, 0.7, "pooler: dense + tanh\n→ NSP: 2 logits", "head", fontsize=7.5)
    ax.text(xs[0] + 0.6, 3.8, "IsNext / NotNext", ha="center", fontsize=7.5)
    for i in (3, 7):
        _box(ax, xs[i], 3.25, 2.3, 0.7, "MLM head: dense, GELU,\nLayerNorm → decoder", "head", fontsize=7)
    ax.text((xs[3] + xs[7]) / 2, 4.2, f"V = {config.vocab_size:,} logits at each masked position;\n"
            "the decoder is the word-embedding matrix, transposed (tied)", ha="center", fontsize=7.5)
    ax.text(xs[-1], 3.25, "no loss at\nother positions", ha="center", fontsize=7, color="#777777")
    return _fit_labels(ax)


TASK_PANELS = {
    "classification": ("single sentence → one label", ["[CLS]", "a", "great", "film", "[SEP]"], "cls"),
    "pair": ("sentence pair → one label", ["[CLS]", "A", "…", "[SEP]", "B", "…", "[SEP]"], "cls"),
    "tagging": ("one label per word (first piece)", ["[CLS]", "Jim", "lives", "in", "Rome", "[SEP]"], "each"),
    "qa": ("question + passage → answer span", ["[CLS]", "who", "?", "[SEP]", "Jim", "lives", "[SEP]"], "span"),
}


@in_learners_language
def task_heads(task: Optional[str] = None, config: Optional[BertConfig] = None, kind: Optional[str] = None,
               ax=None):
    """Where each fine-tuning head reads the encoder (Devlin et al. 2019, Figure 4): a linear
    layer on the pooled [CLS] for single sentences and pairs, one on every token for tagging,
    start and end logits on every passage token for QA. The encoder box names the model of
    `config` and `kind` (BERT-BASE if not given) and its sizes. `task` None draws all four
    panels. Notebooks 08-11 (pass the config the lesson fine-tunes, e.g. `BertConfig.minilm()`,
    kind="minilm")."""
    import matplotlib.pyplot as plt

    config = config or BertConfig.base()
    if task is None:
        fig, axes = plt.subplots(2, 2, figsize=(11, 6.2), dpi=DPI)
        for name, sub in zip(TASK_PANELS, axes.flat):
            task_heads(name, config, kind, ax=sub)
        fig.tight_layout()
        for sub in axes.flat:
            _fit_labels(sub)
        return axes
    if task not in TASK_PANELS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASK_PANELS)}")
    title, tokens, reads = TASK_PANELS[task]
    ax = _axes(ax, figsize=(5.6, 3.3))
    _frame(ax, len(tokens) + 1.0, 4.1, title)
    xs = _encoder_with_outputs(ax, tokens, config, kind)
    if reads == "cls":
        pooled = "pooled [CLS]" if kind_of(config, kind) not in ("distilbert", "gpt") else "[CLS]'s vector"
        _box(ax, xs[0] + 0.7, 3.0, 2.4, 0.6, f"{pooled}\n→ K labels", "head", fontsize=7.5)
    elif reads == "each":
        for x, t in zip(xs[1:-1], tokens[1:-1]):
            _box(ax, x, 3.0, 0.9, 0.5, {"Jim": "B-PER", "Rome": "B-LOC"}.get(t, "O"), "head", fontsize=7.5,
                 verbatim=True)
    else:
        start = tokens.index("[SEP]") + 1
        for x in xs[start:-1]:
            _box(ax, x, 3.0, 0.9, 0.6, "start\nend", "head", fontsize=7)
        ax.text(xs[1], 3.0, "no answer\nin the question", ha="center", va="center", fontsize=7, color="#777777")
    return _fit_labels(ax)


# ---- the family --------------------------------------------------------------------------

# What each variant changes in BERT: (part, BERT's, the variant's); parts equal to BERT's are
# listed with None. Sources: Liu et al. 2019 (RoBERTa), Lan et al. 2020 (ALBERT),
# Sanh et al. 2019 (DistilBERT).
FAMILY: dict[str, list[tuple[str, str, Optional[str]]]] = {
    "roberta": [("vocabulary", "WordPiece, 30k, [UNK]", "byte-level BPE, 50k,\nno unknown token"),
                ("segments", "2 segment embeddings", "1 (pairs marked by </s></s>)"),
                ("positions", "0, 1, 2, ...", "offset past the padding id"),
                ("encoder", "L post-LN layers", None),
                ("pretraining", "MLM + NSP, static masks", "MLM only, dynamic masks,\nfull sentences"),
                ("data and batch", "16 GB, batch 256", "160 GB, batch 8k")],
    "albert": [("vocabulary", "WordPiece, 30k", "SentencePiece, 30k"),
               ("embeddings", "V x H", "V x E, then E x H (E = 128)"),
               ("encoder", "L layers, own weights", "L layers, ONE set of weights"),
               ("segments", "2 segment embeddings", None),
               ("pretraining", "MLM + NSP", "MLM + sentence order (SOP)")],
    "distilbert": [("vocabulary", "WordPiece, 30k", None),
                   ("segments", "2 segment embeddings", "none (pairs marked by [SEP])"),
                   ("encoder", "12 layers", "6 layers, from every\nother teacher layer"),
                   ("pooler", "dense + tanh on [CLS]", "none"),
                   ("pretraining", "MLM + NSP", "distillation from BERT:\nsoft targets + MLM + cosine")],
}


@in_learners_language
def family_differences(name: str, ax=None):
    """A variant of BERT as what it changes: BERT's parts on the left, the variant's on the
    right, the changed ones highlighted and the unchanged ones dimmed. Notebooks 15, 16, 18."""
    if name not in FAMILY:
        raise ValueError(f"unknown variant {name!r}; choose one of {', '.join(FAMILY)}")
    rows = FAMILY[name]
    height = 0.9 * len(rows) + 0.9
    ax = _axes(ax, figsize=(7.2, 0.62 * len(rows) + 1.0))
    _frame(ax, 10.8, height)
    title = {"roberta": "RoBERTa", "albert": "ALBERT", "distilbert": "DistilBERT"}[name]
    ax.text(3.8, height - 0.35, "BERT", ha="center", fontsize=10, fontweight="bold")
    ax.text(8.4, height - 0.35, title, ha="center", fontsize=10, fontweight="bold")
    for i, (part, bert, other) in enumerate(rows):
        y = height - 1.05 - 0.9 * i
        ax.text(1.75, y, part, ha="right", va="center", fontsize=8.5)
        _box(ax, 3.8, y, 3.6, 0.75, bert, "plain", highlight=None if other else False, fontsize=8)
        _box(ax, 8.4, y, 4.4, 0.75, other or "the same", "head" if other else "plain",
             highlight=True if other else False, fontsize=8)
        _arrow(ax, (5.65, y), (6.15, y), color=HIGHLIGHT if other else "#aaaaaa")
    return _fit_labels(ax)


@in_learners_language
def albert_factorised(config: Optional[BertConfig] = None, ax=None):
    """ALBERT's two parameter savings (Lan et al. 2020, section 3.1; notebook 16), counted from
    `config` (ALBERT-BASE if not given): the token table is V x E, then a dense E x H projection,
    instead of BERT's V x H; and one encoder layer's weights are looped L times instead of L
    layers with their own weights."""
    import torch

    from ..family.albert import AlbertConfig
    from ..model.encoder import BertLayer

    config = config or AlbertConfig.base()
    V, E, H, L = config.vocab_size, config.embedding_size, config.hidden_size, config.num_hidden_layers
    with torch.device("meta"):
        per_layer = sum(p.numel() for p in BertLayer(config).parameters())
    ax = _axes(ax, figsize=(8.6, 3.4))
    _frame(ax, 14.0, 5.0, f"{model_name(config, 'albert')}: V = {V:,}, E = {E}, H = {H}, L = {L}")
    ax.text(3.4, 4.45, "embeddings", ha="center", fontsize=9.5, fontweight="bold")
    _box(ax, 3.4, 3.55, 5.4, 0.75, f"BERT: one table V × H\n= {V * H:,} parameters", "plain", highlight=False)
    _box(ax, 1.9, 1.95, 2.6, 0.95, f"table V × E\n{V * E:,}", "embed", fontsize=8.5)
    _box(ax, 5.0, 1.95, 2.6, 0.95, f"dense E × H\n{E * H + H:,}", "embed", fontsize=8.5)
    _arrow(ax, (3.2, 1.95), (3.7, 1.95))
    ax.text(3.4, 0.9, f"ALBERT: {V * E + E * H + H:,} parameters\n"
            f"({(V * E + E * H + H) / (V * H):.0%} of BERT's table)", ha="center", va="center", fontsize=8.5)
    ax.text(10.4, 4.45, "encoder", ha="center", fontsize=9.5, fontweight="bold")
    _box(ax, 10.4, 3.55, 5.4, 0.75, f"BERT: L = {L} layers, each its own weights\n= {L * per_layer:,} parameters",
         "plain", highlight=False)
    _box(ax, 10.4, 1.95, 3.4, 0.95, f"one layer\n{per_layer:,} parameters", "attn", highlight=True, fontsize=8.5)
    _arrow(ax, (12.1, 2.2), (12.1, 1.7), rad=-1.8, color=HIGHLIGHT, lw=1.4)
    ax.text(12.75, 1.95, f"× {L}", ha="left", va="center", fontsize=9, color=HIGHLIGHT)
    ax.text(10.4, 0.9, f"ALBERT: the same layer looped {L} times:\n{per_layer:,} parameters, "
            f"the same compute as BERT", ha="center", va="center", fontsize=8.5)
    return _fit_labels(ax)
