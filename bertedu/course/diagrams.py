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

Every function draws on a matplotlib Axes (made if not given) and returns it.
Introduced in notebook 00 (the map); each lesson opens with its own `you_are_here`.
"""

from __future__ import annotations

import json
from typing import Callable, NamedTuple, Optional, Sequence

from ..model.config import PRESETS, BertConfig

# Colours: one per kind of piece, the same in every picture.
COLORS = {
    "text": "#f2f2f2", "tokens": "#dbe9f6", "embed": "#fde2c4", "attn": "#d4edda", "ffn": "#e6dcf2",
    "norm": "#fff3b0", "head": "#f8d0d0", "plain": "#ffffff", "dropped": "#e0e0e0",
}
HIGHLIGHT = "#d62728"
DIM_ALPHA = 0.35
DPI = 150  # the course's resolution for pictures: a 4.6-inch map is 690 pixels wide
SMALLEST_FONT = 6.0  # points; `_fit_labels` shrinks a label no further


def _axes(ax=None, figsize=(6, 4)):
    """`ax`, or a new Axes filling a figure of `figsize` inches at `DPI`, with room for a title."""
    import matplotlib.pyplot as plt

    if ax is None:
        fig, ax = plt.subplots(figsize=figsize, dpi=DPI)
        fig.subplots_adjust(left=0.01, right=0.99, bottom=0.01, top=0.9)
    ax.set_axis_off()
    return ax


def _box(ax, x: float, y: float, w: float, h: float, text: str, kind: str = "plain",
         highlight: Optional[bool] = None, fontsize: float = 8.5, gid: Optional[str] = None):
    """A rounded box centred on (x, y); highlight True draws it red-edged, False dims it."""
    from matplotlib.patches import FancyBboxPatch

    edge, width, alpha = "#555555", 0.8, 1.0
    if highlight:
        edge, width = HIGHLIGHT, 2.4
    elif highlight is False:
        alpha = DIM_ALPHA
    patch = FancyBboxPatch((x - w / 2, y - h / 2), w, h, boxstyle="round,pad=0.02,rounding_size=0.06",
                           facecolor=COLORS[kind], edgecolor=edge, linewidth=width, alpha=alpha, zorder=2)
    patch.set_gid(gid)
    ax.add_patch(patch)
    ax.text(x, y, text, ha="center", va="center", fontsize=fontsize, zorder=3, alpha=max(alpha, 0.6),
            fontweight="bold" if highlight else "normal")
    return patch


def _arrow(ax, start, end, color: str = "#444444", style: str = "-|>", rad: float = 0.0, lw: float = 1.0):
    ax.annotate("", xy=end, xytext=start, zorder=1,
                arrowprops=dict(arrowstyle=style, color=color, lw=lw, shrinkA=0, shrinkB=0,
                                connectionstyle=f"arc3,rad={rad}"))


def _frame(ax, width: float, height: float, title: Optional[str] = None):
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    if title:
        ax.set_title(title, fontsize=10)


# ---- labels inside their boxes ---------------------------------------------------------------

def _figure(fig_or_ax):
    """The Figure of a Figure, an Axes or an array of Axes."""
    if hasattr(fig_or_ax, "flat"):
        return fig_or_ax.flat[0].figure
    return fig_or_ax.figure


def _label_boxes(ax, renderer, free: bool = False) -> list:
    """(text, its box's display extent) for every non-empty text of `ax` whose anchor point lies
    inside a patch; a text's box is the smallest patch around its anchor. `free`: instead
    (text, None) for every text whose anchor lies in no patch."""
    boxes = [p.get_window_extent(renderer) for p in ax.patches if p.get_visible()]
    pairs = []
    for text in ax.texts:
        if not text.get_visible() or not text.get_text().strip():
            continue
        x, y = text.get_transform().transform(text.get_position())
        inside = [b for b in boxes if b.contains(x, y)]
        if inside and not free:
            pairs.append((text, min(inside, key=lambda b: b.width * b.height)))
        elif free and not inside:
            pairs.append((text, None))
    return pairs


def label_overflows(fig_or_ax, tolerance: float = 0.5) -> list[str]:
    """Draw the figure and return one line for every label that leaves its box: the label's
    window extent compared with its box's patch extent, in display pixels (`tolerance` allowed).
    A label is a text whose anchor lies inside a patch; a text anchored outside every patch
    must not run into one. Every Axes of the figure is checked."""
    fig = _figure(fig_or_ax)
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        for text, box in _label_boxes(ax, renderer):
            ext = text.get_window_extent(renderer)
            over = max(box.x0 - ext.x0, ext.x1 - box.x1, box.y0 - ext.y0, ext.y1 - box.y1)
            if over > tolerance:
                found.append(f"{text.get_text()!r} leaves its box by {over:.1f} px")
        boxes = [p.get_window_extent(renderer) for p in ax.patches if p.get_visible()]
        for text, _ in _label_boxes(ax, renderer, free=True):
            ext = text.get_window_extent(renderer)
            for box in boxes:
                overlap = min(min(ext.x1, box.x1) - max(ext.x0, box.x0), min(ext.y1, box.y1) - max(ext.y0, box.y0))
                if overlap > tolerance:
                    found.append(f"{text.get_text()!r} runs {overlap:.1f} px into a box")
                    break
    return found


def _fit_labels(ax, margin: float = 3.0):
    """Shrink each label of `ax` (half a point at a time, to `SMALLEST_FONT`) until it fits
    inside its box with `margin` pixels to spare; returns `ax`. Call it last: it draws."""
    fig = ax.figure
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    for text, box in _label_boxes(ax, renderer):
        while text.get_fontsize() > SMALLEST_FONT:
            ext = text.get_window_extent(renderer)
            if ext.width <= box.width - 2 * margin and ext.height <= box.height - margin:
                break
            text.set_fontsize(max(SMALLEST_FONT, text.get_fontsize() - 0.5))
    return ax


# ---- which model ---------------------------------------------------------------------------

class ModelKind(NamedTuple):
    """What a picture needs to know beyond the config: the family's name, its vocabulary, how
    an input starts and ends, whether attention is causal, whether the L layers share one set of
    weights, the heads the checkpoint carries for pretraining, and the text it reads."""
    family: str
    vocabulary: str
    example: str
    causal: bool
    shared_layers: bool
    pretraining: str
    text: str = "text: “the cat sat on the mat”"


KINDS: dict[str, ModelKind] = {
    "bert": ModelKind("BERT", "WordPiece", "[CLS] the cat … [SEP]", False, False, "pretraining heads\nMLM + NSP"),
    "bert-mlm": ModelKind("BERT", "WordPiece", "[CLS] the cat … [SEP]", False, False,
                          "pretraining head\nMLM only (no NSP)"),
    "minilm": ModelKind("all-MiniLM-L6-v2", "WordPiece", "[CLS] the cat … [SEP]", False, False,
                        "no MLM or NSP head\n(as shipped)"),
    "roberta": ModelKind("RoBERTa", "byte-level BPE", "<s> the cat … </s>", False, False,
                         "pretraining head\nMLM only (no NSP)"),
    "albert": ModelKind("ALBERT", "SentencePiece", "[CLS] the cat … [SEP]", False, True,
                        "pretraining heads\nMLM + sentence order"),
    "course-zh": ModelKind("course-zh", "WordPiece", "[CLS] one piece per character [SEP]", False, False,
                           "pretraining head\nMLM only (no NSP)", "text: a Chinese sentence (People's Daily)"),
    "distilbert": ModelKind("DistilBERT", "WordPiece", "[CLS] the cat … [SEP]", False, False,
                            "distilled from a teacher\n(no pooler, no NSP)"),
    "gpt": ModelKind("GPT", "", "the cat sat on …", True, False, "next-token head\n(no MLM, no NSP)"),
}


def kind_of(config: BertConfig, kind: Optional[str] = None) -> str:
    """`kind` checked, or the kind the config's class implies (`RobertaConfig` -> "roberta", ...;
    a plain `BertConfig` -> "bert": pass "minilm" or "bert-mlm" where the checkpoint differs)."""
    if kind is not None:
        if kind not in KINDS:
            raise ValueError(f"unknown kind {kind!r}; choose one of {', '.join(KINDS)}")
        return kind
    names = [cls.__name__ for cls in type(config).__mro__]
    for class_name, implied in (("GPTConfig", "gpt"), ("DistilBertConfig", "distilbert"),
                                ("AlbertConfig", "albert"), ("RobertaConfig", "roberta")):
        if class_name in names:
            return implied
    return "bert"


def model_name(config: BertConfig, kind: Optional[str] = None) -> str:
    """"all-MiniLM-L6-v2", "BERT-BASE", "BERT tiny", "ALBERT-BASE", "course-zh (BERT tiny)", ...:
    the family, and the preset whose (L, H, A) the config has, if any."""
    kind = kind_of(config, kind)
    family = KINDS[kind].family
    if kind == "minilm":
        return family
    shape = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads)
    preset = next((name for name, sizes in PRESETS.items() if sizes == shape), None)
    if kind == "course-zh":  # the shipped Chinese masked LM, a BERT of a preset's size
        return f"{family} (BERT {preset})" if preset else family
    if preset in ("base", "large"):
        return f"{family}-{preset.upper()}"
    return f"{family} {preset}" if preset and preset != "minilm" else family


def model_sizes(config: BertConfig) -> str:
    """"6 layers (H = 384)": the words every picture's title uses for a config's size."""
    return f"{config.num_hidden_layers} layers (H = {config.hidden_size})"


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
    `LESSON_MODELS`; at "gpu", 07 and 12 run BERT-BASE, and 08-11 fine-tune notebook 07's
    BERT-BASE run when $BERTEDU_PRETRAINED names one (`gpu_scale_init`), else MiniLM."""
    if notebook not in LESSON_MODELS:
        raise ValueError(f"no lesson {notebook}; the lessons are 0-{max(LESSON_MODELS)}")
    if scale not in ("cpu", "gpu"):
        raise ValueError(f"scale is 'cpu' or 'gpu', not {scale!r}")
    if scale == "gpu" and notebook in (7, 12):
        return BertConfig.base(), "bert"
    if scale == "gpu" and notebook in (8, 9, 10, 11):
        from ..training.finetune import gpu_scale_init

        return (BertConfig.minilm(), "minilm") if gpu_scale_init()[0] == "minilm" else (BertConfig.base(), "bert")
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
            _box(ax, 1.9 + i, y, 0.9, 0.6, text(i), kind, fontsize=7 if len(text(i)) > 7 else 8)
    for i in range(n):
        for y in (2.45, 1.45):
            ax.text(1.9 + i, y, "+", ha="center", va="center", fontsize=10)
    ax.text(1.25, 0.25, "sum, then LayerNorm and dropout → the encoder", ha="left", fontsize=8, style="italic")
    return _fit_labels(ax)


# ---- attention ---------------------------------------------------------------------------

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


# ---- mechanisms ----------------------------------------------------------------------------

def _palette(n: int) -> list:
    import matplotlib.pyplot as plt

    cmap = plt.get_cmap("tab20")
    return [cmap(i % 20) for i in range(n)]


def _cells(ax, x0: float, y_top: float, rows: int, widths: Sequence[float], colours: Sequence, gap: float = 0.0,
           row_height: float = 0.5, row_gap: float = 0.1) -> None:
    """`rows` rows of coloured cells of `widths` (`gap` between cells, `row_gap` between rows),
    from (x0, y_top) down."""
    from matplotlib.patches import Rectangle

    for r in range(rows):
        x = x0
        for width, colour in zip(widths, colours):
            ax.add_patch(Rectangle((x, y_top - (r + 1) * row_height + row_gap / 2), width, row_height - row_gap,
                                   facecolor=colour, edgecolor="white", linewidth=0.5))
            x += width + gap


def multihead_reshape(config: Optional[BertConfig] = None, batch: int = 2, tokens: int = 4, ax=None):
    """How one (B, T, D) projection becomes N heads (notebook 04): `view(B, T, N, Dh)` cuts each
    token's D numbers into N slices of Dh = D / N (one colour per head), then `transpose(1, 2)`
    gathers each head's slices of all T tokens into its own (T, Dh) matrix: (B, N, T, Dh).
    One of the B sequences is drawn; sizes from `config` (tiny with 4 heads if not given)."""
    from matplotlib.patches import Rectangle

    config = config or BertConfig.tiny(num_attention_heads=4)
    B, T, D, N, Dh = batch, tokens, config.hidden_size, config.num_attention_heads, config.head_dim
    if not 1 <= T <= 12:
        raise ValueError(f"draw 1-12 tokens, not {T}: the picture shows every token as a row")
    colours, row_h, top = _palette(N), 2.6 / T, 4.3
    ax = _axes(ax, figsize=(9.0, 3.6))
    _frame(ax, 15.0, 6.0, f"D = {D} numbers per token become N = {N} heads of Dh = D / N = {Dh}")
    _cells(ax, 1.2, top, T, [3.6 / N] * N, colours, row_height=row_h)
    gap = min(0.12, 1.0 / N)
    _cells(ax, 6.0, top, T, [(3.6 - gap * (N - 1)) / N] * N, colours, gap=gap, row_height=row_h)
    head_gap = min(0.25, 1.6 / N)
    head_width = (4.0 - head_gap * (N - 1)) / N
    for n in range(N):  # each head: its T rows now one contiguous (T, Dh) matrix
        x = 10.8 + n * (head_width + head_gap)
        _cells(ax, x, top, T, [head_width], [colours[n]], row_height=row_h, row_gap=0.0)
        ax.add_patch(Rectangle((x, top - T * row_h), head_width, T * row_h, fill=False, edgecolor="#333333"))
    for x, name in ((10.8 + head_width / 2, "head 0"), (14.8 - head_width / 2, f"head {N - 1}")):
        ax.text(x, top + 0.1, name, ha="center", va="bottom", fontsize=7)
    for t in range(T):
        ax.text(1.05, top - (t + 0.5) * row_h, f"token {t}", ha="right", va="center", fontsize=7.5)
    for x, shape, values in ((3.0, "(B, T, D)", (B, T, D)), (7.8, "(B, T, N, Dh)", (B, T, N, Dh)),
                             (12.8, "(B, N, T, Dh)", (B, N, T, Dh))):
        ax.text(x, top - T * row_h - 0.35, f"{shape}\n= {values}", ha="center", va="top", fontsize=8.5)
    for x0, x1, code in ((4.9, 5.9, "view(B, T, N, Dh)"), (9.7, 10.7, "transpose(1, 2)")):
        _arrow(ax, (x0, top - 1.3), (x1, top - 1.3))
        ax.text((x0 + x1) / 2, top + 0.6, code, ha="center", fontsize=8, family="monospace")
    ax.text(7.5, 0.2, f"one of the B = {B} sequences; view and transpose move no number in memory, "
            "they index the same numbers anew", ha="center", fontsize=7.5, style="italic")
    return _fit_labels(ax)


def position_rows_trained(phase_lengths: Sequence[int] = (128, 512), max_positions: int = 512, ax=None):
    """Which rows of the position-embedding table each pretraining phase trains (notebook 07):
    a phase of sequences of n tokens reads (and so trains) rows 0..n-1 only; rows past the
    longest phase stay at their random start. BERT's recipe is 90% of steps at 128 tokens, then
    10% at 512 (Devlin et al. 2019, appendix A.2): `phase_lengths` (128, 512)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    if any(not 1 <= n <= max_positions for n in phase_lengths):
        raise ValueError(f"phase lengths {list(phase_lengths)} must be 1..max_positions={max_positions}")
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.4, 0.75 * len(phase_lengths) + 1.5), dpi=DPI)
    bars = [(f"phase {i + 1}: {n} tokens", n) for i, n in enumerate(phase_lengths)]
    bars.append(("after all phases", max(phase_lengths)))
    for row, (name, n) in enumerate(reversed(bars)):
        ax.add_patch(Rectangle((0, row - 0.2), n, 0.4, facecolor=COLORS["attn"], edgecolor="#555555"))
        if n < max_positions:
            ax.add_patch(Rectangle((n, row - 0.2), max_positions - n, 0.4, facecolor=COLORS["dropped"],
                                   edgecolor="#555555", hatch="//"))
        untouched = f"; rows {n}-{max_positions - 1} untouched" if n < max_positions else ""
        ax.text(0, row + 0.27, f"{name}: rows 0-{n - 1} trained{untouched}", fontsize=8, va="bottom")
    ax.set(xlim=(0, max_positions), ylim=(-0.5, len(bars) - 0.2), yticks=[],
           xlabel="row of the position-embedding table (= position in the sequence)")
    ax.set_title(f"which of the {max_positions} position rows each phase trains", fontsize=10)
    for side in ("top", "right", "left"):
        ax.spines[side].set_visible(False)
    return ax


def training_memory(config: BertConfig, batch_size: int, seq_len: int) -> dict[str, int]:
    """Bytes one fp32 training step of `BertForPreTraining(config)` holds with AdamW (notebook 07):
    weights, gradients (one per weight), the optimizer's two moments (two per weight) and the
    activations autograd keeps for the backward pass. Parameters are counted on the meta device
    (no memory); activations by the count of what this implementation saves (dropout on, MLM
    logits at every position), per layer 10·BTH + 2·BTI + 3·BNT² + 4·BT values, plus 6·BTH + BTV
    for the embeddings and heads (tests/test_diagrams.py checks it against the tensors autograd
    saves on the CPU). A fused GPU attention kernel (FlashAttention) keeps none of the T x T
    matrices, so there the activations are smaller; with dropout off fewer tensors are kept, so
    such a config is refused rather than overcounted."""
    import torch

    from ..model.heads import BertForPreTraining

    if config.hidden_dropout_prob == 0 or config.attention_probs_dropout_prob == 0:
        raise ValueError("training_memory counts a step with dropout on (hidden_dropout_prob and "
                         "attention_probs_dropout_prob above 0, BERT's 0.1); this config turns it off")

    with torch.device("meta"):
        n = sum(p.numel() for p in BertForPreTraining(config).parameters())
    bt, H, I = batch_size * seq_len, config.hidden_size, config.intermediate_size
    layer = 10 * bt * H + 2 * bt * I + 3 * batch_size * config.num_attention_heads * seq_len ** 2 + 4 * bt
    values = config.num_hidden_layers * layer + 6 * bt * H + bt * config.vocab_size
    return {"weights": 4 * n, "gradients": 4 * n, "optimizer moments": 8 * n, "activations": 4 * values}


def _bytes(n: int) -> str:
    return f"{n / 2 ** 30:.2f} GiB" if n >= 2 ** 30 else f"{n / 2 ** 20:.1f} MiB"


def memory_split(config: Optional[BertConfig] = None, batch_size: int = 8, seq_len: int = 128, ax=None):
    """The memory of one training step split into weights, gradients, AdamW's moments and
    activations (notebook 07), each part's bytes from `training_memory(config, batch_size,
    seq_len)`: one bar, the parts in proportion, their sizes beneath. BERT-BASE if not given."""
    import matplotlib.pyplot as plt

    config = config or BertConfig.base()
    parts = training_memory(config, batch_size, seq_len)
    total = sum(parts.values())
    if ax is None:
        fig, ax = plt.subplots(figsize=(7.4, 2.2), dpi=DPI)
    colours = [COLORS["embed"], COLORS["ffn"], COLORS["norm"], COLORS["attn"]]
    left = 0.0
    for (name, size), colour in zip(parts.items(), colours):
        ax.barh(0, size / total, left=left, height=0.5, color=colour, edgecolor="#555555")
        left += size / total
    labels = [f"{name}: {_bytes(size)} ({size / total:.0%})" for name, size in parts.items()]
    for i, (label, colour) in enumerate(zip(labels, colours)):
        ax.scatter([0.01 + 0.5 * (i % 2)], [-0.55 - 0.3 * (i // 2)], s=60, marker="s", color=colour,
                   edgecolor="#555555")
        ax.text(0.04 + 0.5 * (i % 2), -0.55 - 0.3 * (i // 2), label, va="center", fontsize=8.5)
    ax.set(xlim=(0, 1), ylim=(-1.05, 0.35))
    ax.set_axis_off()
    ax.set_title(f"one fp32 training step with AdamW: {model_name(config)}, {model_sizes(config)}, "
                 f"batch {batch_size} × {seq_len}: {_bytes(total)}", fontsize=9.5)
    return ax


def continuation_labels(words: Sequence[str], pieces: Sequence[Sequence[str]], tags: Sequence[str], ax=None):
    """A sentence's words cut into WordPiece pieces and the labels token classification trains
    on (notebook 09): each word's tag on its first piece, -100 (ignored by the loss) on every
    continuation piece and on [CLS] and [SEP]. `pieces[i]` are word i's pieces (the tokenizer's
    `tokenize(word)`), `tags[i]` its tag."""
    if not len(words) == len(pieces) == len(tags):
        raise ValueError(f"{len(words)} words, {len(pieces)} piece lists and {len(tags)} tags: give one of each per word")
    columns = [("[CLS]", None, "-100")]
    for w, (word, cut, tag) in enumerate(zip(words, pieces, tags)):
        columns += [(piece, w, tag if j == 0 else "-100") for j, piece in enumerate(cut)]
    columns.append(("[SEP]", None, "-100"))
    ax = _axes(ax, figsize=(max(4.5, 0.8 * len(columns) + 1.4), 2.9))
    _frame(ax, 1.6 + 1.2 * len(columns), 3.9, "each word's tag on its first piece; -100 elsewhere")
    xs = [2.0 + 1.2 * i for i in range(len(columns))]
    for label, y in (("words", 3.1), ("pieces", 2.0), ("labels", 0.9)):
        ax.text(1.3, y, label, ha="right", va="center", fontsize=8.5)
    for w, word in enumerate(words):
        span = [x for x, (_, owner, _) in zip(xs, columns) if owner == w]
        _box(ax, (span[0] + span[-1]) / 2, 3.1, span[-1] - span[0] + 1.05, 0.55, word, "text", fontsize=8.5)
    for x, (piece, owner, label) in zip(xs, columns):
        _box(ax, x, 2.0, 1.05, 0.55, piece, "tokens", fontsize=8.5)
        continuation = owner is not None and label == "-100"
        _box(ax, x, 0.9, 1.05, 0.55, label, "head" if label != "-100" else "plain",
             highlight=True if continuation else (False if owner is None else None), fontsize=8.5)
        _arrow(ax, (x, 1.7), (x, 1.2))
    ax.text(xs[0] - 0.6, 0.25, "-100: cross-entropy's ignore_index, no loss; red: a word's continuation piece",
            fontsize=7.5, style="italic")
    return _fit_labels(ax)


def pack_rows(lengths: Sequence[int], row_length: int) -> list[list[int]]:
    """Sequence indices packed in order into rows of `row_length` tokens: a sequence that does
    not fit in the current row starts the next one (none is split). Notebook 12's packed batch."""
    if any(not 1 <= n <= row_length for n in lengths):
        raise ValueError(f"lengths must be 1..row_length={row_length}, got {sorted(lengths)[-1]}")
    rows, used = [[]], 0
    for i, n in enumerate(lengths):
        if used + n > row_length:
            rows.append([])
            used = 0
        rows[-1].append(i)
        used += n
    return rows


def padded_vs_packed(lengths: Sequence[int], row_length: Optional[int] = None, ax=None):
    """The same sequences as a padded batch (one row each, padded to the longest) and packed
    (several per row, in order), with the padding share of each (notebook 12). `lengths`: the
    real tokens of each sequence (e.g. `attention_mask.sum(1).tolist()`); `row_length`: the
    padded width (the longest sequence if not given)."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    W = row_length or max(lengths)
    rows = pack_rows(lengths, W)
    if ax is None:
        fig, ax = plt.subplots(figsize=(8.4, 0.22 * len(lengths) + 1.6), dpi=DPI)
    colours, gap = _palette(len(lengths)), 0.12 * W
    for i, n in enumerate(lengths):
        ax.add_patch(Rectangle((0, -i - 0.9), n, 0.8, facecolor=colours[i], edgecolor="white"))
        ax.add_patch(Rectangle((n, -i - 0.9), W - n, 0.8, facecolor=COLORS["dropped"], edgecolor="white"))
    for r, members in enumerate(rows):
        x = W + gap
        for i in members:
            ax.add_patch(Rectangle((x, -r - 0.9), lengths[i], 0.8, facecolor=colours[i], edgecolor="white"))
            x += lengths[i]
        ax.add_patch(Rectangle((x, -r - 0.9), 2 * W + gap - x, 0.8, facecolor=COLORS["dropped"], edgecolor="white"))
    real = sum(lengths)
    for x, name, n_rows in ((0, "padded", len(lengths)), (W + gap, "packed", len(rows))):
        ax.text(x, 0.25, f"{name}: {n_rows} rows × {W} = {n_rows * W:,} slots, "
                f"{1 - real / (n_rows * W):.0%} padding", fontsize=8.5)
    ax.set(xlim=(0, 2 * W + gap), ylim=(-len(lengths) - 0.2, 1.0))
    ax.set_axis_off()
    ax.set_title(f"{len(lengths)} sequences, {real:,} real tokens (grey: padding)", fontsize=10)
    return ax


# ---- heads -------------------------------------------------------------------------------

def _encoder_with_outputs(ax, tokens: Sequence[str], config: BertConfig, kind: Optional[str] = None,
                          y: float = 1.6) -> list[float]:
    """Tokens in a row, the encoder as one wide box above them (its name and sizes from
    `config`), one output arrow per token."""
    xs = [1.0 + 1.0 * i for i in range(len(tokens))]
    for x, t in zip(xs, tokens):
        _box(ax, x, 0.45, 0.92, 0.5, t, "tokens", fontsize=7.5)
        _arrow(ax, (x, 0.72), (x, y - 0.45))
    width = xs[-1] - xs[0] + 1.0
    _box(ax, (xs[0] + xs[-1]) / 2, y, width, 0.8,
         f"{model_name(config, kind)} encoder\nembeddings + {model_sizes(config)}", "norm", fontsize=8)
    for x in xs:
        _arrow(ax, (x, y + 0.42), (x, y + 0.85))
    return xs


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
            _box(ax, x, 3.0, 0.9, 0.5, {"Jim": "B-PER", "Rome": "B-LOC"}.get(t, "O"), "head", fontsize=7.5)
    else:
        start = tokens.index("[SEP]") + 1
        for x in xs[start:-1]:
            _box(ax, x, 3.0, 0.9, 0.6, "start\nend", "head", fontsize=7)
        ax.text(xs[1], 3.0, "no answer\nin the question", ha="center", va="center", fontsize=7, color="#777777")
    return _fit_labels(ax)


def parameter_groups(keys: Sequence[str]) -> dict[str, list[str]]:
    """State-dict keys grouped by the module they belong to, in first-seen order, the model's
    prefix (bert., roberta., ...) dropped and numbered layers merged: "bert.encoder.layer.3.
    output.dense.weight" -> "encoder.layer 0-5" (with the range of layer numbers present)."""
    groups: dict[str, list[str]] = {}
    numbers: dict[str, set[int]] = {}
    for key in keys:
        parts = key.split(".")
        if parts[0] in ("bert", "roberta", "albert", "distilbert") and len(parts) > 2:
            parts = parts[1:]
        numbered = next((i for i, p in enumerate(parts[:-1]) if p.isdigit()), None)
        if numbered is not None:
            name = ".".join(parts[:numbered])
            numbers.setdefault(name, set()).add(int(parts[numbered]))
        else:
            name = ".".join(parts[:2]) if parts[0] == "cls" or len(parts) > 3 else parts[0]
        groups.setdefault(name, []).append(key)
    return {(f"{name} {min(numbers[name])}-{max(numbers[name])}" if name in numbers else name): members
            for name, members in groups.items()}


def _tensors(n: int) -> str:
    return f"{n} tensor" if n == 1 else f"{n} tensors"


def checkpoint_to_head(model_keys: Sequence[str], missing_keys: Sequence[str] = (),
                       unexpected_keys: Sequence[str] = (), checkpoint: str = "checkpoint",
                       model_class: str = "model class", ax=None):
    """What `from_pretrained` does with a checkpoint (notebook 13): each module of the model
    class that the checkpoint holds is loaded (arrow), each it lacks (`missing_keys`) is
    initialised at random: the new head; each checkpoint module the class has no place for
    (`unexpected_keys`, e.g. an MLM head under a classifier) is dropped. Pass the model's
    `state_dict().keys()` and the loading info of `from_pretrained(..., output_loading_info=True)`."""
    missing, unexpected = set(missing_keys), list(unexpected_keys)
    model = parameter_groups(list(model_keys))
    stored = parameter_groups([k for k in model_keys if k not in missing] + unexpected)
    dropped = set(parameter_groups(unexpected))
    rows = max(len(model), len(stored))
    ax = _axes(ax, figsize=(7.6, 0.55 * rows + 1.5))
    _frame(ax, 12.0, 0.9 * rows + 1.4)
    top = 0.9 * rows + 0.75
    ax.text(2.6, top, checkpoint, ha="center", fontsize=9.5, fontweight="bold")
    ax.text(9.4, top, model_class, ha="center", fontsize=9.5, fontweight="bold")
    left = {}
    for i, (name, keys) in enumerate(stored.items()):
        y = top - 0.8 - 0.9 * i
        left[name] = y
        label = f"{name} ({_tensors(len(keys))})" + ("\ndropped: no place in the class" if name in dropped else "")
        _box(ax, 2.6, y, 4.6, 0.7, label, "dropped" if name in dropped else "plain",
             highlight=False if name in dropped else None, fontsize=8)
    for i, (name, keys) in enumerate(model.items()):
        y = top - 0.8 - 0.9 * i
        new = all(k in missing for k in keys)
        label = f"{name} ({_tensors(len(keys))})" + ("\nnew: initialised at random" if new else "")
        _box(ax, 9.4, y, 4.6, 0.7, label, "head" if new else "plain", highlight=True if new else None, fontsize=8)
        if name in left:
            _arrow(ax, (4.95, left[name]), (7.05, y), color="#2ca02c")
    ax.text(6.0, 0.15, "green: loaded from the checkpoint; red: the new head, trained by fine-tuning",
            ha="center", fontsize=7.5, style="italic")
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
