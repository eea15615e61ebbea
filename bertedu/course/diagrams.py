"""Pictures of the architecture, drawn by code from a model's config.

The data plots of `viz.py` show what a model computed; these show what a model *is*: boxes
and arrows, labelled with the sizes of the config they are given, so a picture can never
disagree with the model beside it. They render offline with matplotlib alone, in
JupyterLab, on GitHub and in the slides.

    you_are_here(notebook)     the map of BERT that opens every lesson, its piece highlighted
    input_representation(...)  token + segment + position embeddings (Devlin et al. 2019, Figure 2)
    attention_flow(...)        queries, keys and values, scores, the mask, softmax, the weighted sum
    encoder_blocks(...)        the post-LayerNorm block with its residuals, beside pre-LayerNorm
    pretraining_heads(...)     the MLM head at masked positions and the NSP head on [CLS]
    task_heads(...)            where each fine-tuning head reads the encoder (the paper's Figure 4)
    family_differences(name)   RoBERTa, ALBERT or DistilBERT as what they change in BERT

Every function draws on a matplotlib Axes (made if not given) and returns it.
Introduced in notebook 00 (the map); each lesson opens with its own `you_are_here`.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..model.config import BertConfig

# Colours: one per kind of piece, the same in every picture.
COLORS = {
    "text": "#f2f2f2", "tokens": "#dbe9f6", "embed": "#fde2c4", "attn": "#d4edda", "ffn": "#e6dcf2",
    "norm": "#fff3b0", "head": "#f8d0d0", "plain": "#ffffff",
}
HIGHLIGHT = "#d62728"
DIM_ALPHA = 0.35


def _axes(ax=None, figsize=(6, 4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
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


def map_boxes(config: BertConfig) -> dict[str, tuple[float, float, float, float, str, str]]:
    """The map's boxes: name -> (x, y, width, height, label, colour kind), labels from `config`."""
    L, H, A, V = (config.num_hidden_layers, config.hidden_size, config.num_attention_heads, config.vocab_size)
    return {
        "text": (3.0, 0.45, 5.6, 0.5, "text: “the cat sat on the mat”", "text"),
        "tokens": (3.0, 1.3, 5.6, 0.55, f"WordPiece tokens  [CLS] the cat … [SEP]   (V = {V:,})", "tokens"),
        "embed": (3.0, 2.2, 5.6, 0.6, f"embeddings: token + segment + position   (H = {H})", "embed"),
        "attn": (2.05, 3.35, 3.3, 0.6, f"self-attention\n(A = {A} heads)", "attn"),
        "ffn": (2.05, 4.25, 3.3, 0.6, f"feed-forward\n({H} → {config.intermediate_size} → {H})", "ffn"),
        "layers": (4.75, 3.8, 1.7, 1.55, f"× L = {L}\nlayers,\nresidual +\nLayerNorm", "norm"),
        "pretrain": (1.6, 5.45, 2.8, 0.7, "pretraining heads\nMLM + NSP", "head"),
        "tasks": (4.45, 5.45, 2.9, 0.7, "fine-tuning heads\nclass · tag · pair · QA", "head"),
    }


def you_are_here(notebook: int, config: Optional[BertConfig] = None, ax=None):
    """The map of BERT (bottom to top: text, tokens, embeddings, L encoder layers, heads) with
    the pieces of lesson `notebook` highlighted and the rest dimmed; sizes from `config`
    (BERT-BASE if not given). Notebook 0 shows the whole map, nothing dimmed."""
    if notebook not in LESSON_PIECES:
        raise ValueError(f"no lesson {notebook}; the lessons are 0-{max(LESSON_PIECES)}")
    config = config or BertConfig.base()
    ax = _axes(ax, figsize=(4.2, 4.1))
    _frame(ax, 6.0, 6.0, f"you are here: {notebook:02d} · {LESSON_TITLES[notebook]}")
    pieces = LESSON_PIECES[notebook]
    for name, (x, y, w, h, label, kind) in map_boxes(config).items():
        highlight = None if not pieces else name in pieces
        _box(ax, x, y, w, h, label, kind, highlight=highlight, fontsize=7.5, gid=f"map-{name}")
    for y0, y1 in ((0.7, 1.02), (1.58, 1.9), (2.5, 3.05)):
        _arrow(ax, (2.05 if y0 > 2 else 3.0, y0), (2.05 if y0 > 2 else 3.0, y1))
    _arrow(ax, (2.05, 3.65), (2.05, 3.95))
    _arrow(ax, (1.6, 4.55), (1.6, 5.1))
    _arrow(ax, (3.2, 4.55), (4.2, 5.1))
    return ax


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
    return ax


# ---- attention ---------------------------------------------------------------------------

def attention_flow(config: Optional[BertConfig] = None, causal: bool = False, ax=None):
    """One head of self-attention as a flow, shapes from `config`: the hidden states X give
    queries, keys and values; scores QKᵀ/√d_k; the mask (padding, or causal for GPT) sets
    scores to -inf; softmax over keys; the probabilities weight the values."""
    config = config or BertConfig.base()
    D, N, Dh = config.hidden_size, config.num_attention_heads, config.head_dim
    ax = _axes(ax, figsize=(6.6, 3.3))
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
    return ax


def encoder_blocks(config: Optional[BertConfig] = None, ax=None):
    """BERT's post-LayerNorm encoder layer (LayerNorm after each residual sum, as Vaswani et
    al. 2017 and Devlin et al. 2019) beside the pre-LayerNorm layer of GPT-2 and most later
    models (LayerNorm inside the branch, the residual path left clean)."""
    config = config or BertConfig.base()
    ax = _axes(ax, figsize=(6.4, 4.4))
    _frame(ax, 10.0, 7.0, f"one encoder layer, repeated L = {config.num_hidden_layers} times")
    for x0, post in ((2.5, True), (7.5, False)):
        ax.text(x0, 6.75, "post-LN (BERT)" if post else "pre-LN (GPT-2, later BERTs)", ha="center", fontsize=9,
                fontweight="bold")
        _encoder_column(ax, x0, post, config)
    return ax


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

def _encoder_with_outputs(ax, tokens: Sequence[str], config: BertConfig, y: float = 1.6) -> list[float]:
    """Tokens in a row, the encoder as one wide box above them, one output arrow per token."""
    xs = [1.0 + 1.0 * i for i in range(len(tokens))]
    for x, t in zip(xs, tokens):
        _box(ax, x, 0.45, 0.92, 0.5, t, "tokens", fontsize=7.5)
        _arrow(ax, (x, 0.72), (x, y - 0.45))
    width = xs[-1] - xs[0] + 1.0
    _box(ax, (xs[0] + xs[-1]) / 2, y, width, 0.8,
         f"BERT encoder: embeddings + {config.num_hidden_layers} layers (H = {config.hidden_size})", "norm")
    for x in xs:
        _arrow(ax, (x, y + 0.42), (x, y + 0.85))
    return xs


def pretraining_heads(config: Optional[BertConfig] = None, ax=None):
    """BertForPreTraining: the MLM head on every masked position (dense, GELU, LayerNorm, then a
    decoder tied to the word embeddings, V logits) and the NSP head on [CLS] (the pooler's
    dense + tanh, then 2 logits: IsNext / NotNext)."""
    config = config or BertConfig.base()
    tokens = ["[CLS]", "my", "dog", "[MASK]", "cute", "[SEP]", "he", "[MASK]", "play", "[SEP]"]
    ax = _axes(ax, figsize=(7.0, 3.6))
    _frame(ax, 11.0, 5.4)
    xs = _encoder_with_outputs(ax, tokens, config)
    _box(ax, xs[0] + 0.6, 3.25, 2.1, 0.7, "pooler: dense + tanh\n→ NSP: 2 logits", "head", fontsize=7.5)
    ax.text(xs[0] + 0.6, 3.8, "IsNext / NotNext", ha="center", fontsize=7.5)
    for i in (3, 7):
        _box(ax, xs[i], 3.25, 2.2, 0.7, "MLM head: dense, GELU,\nLayerNorm → decoder", "head", fontsize=6.5)
    ax.text((xs[3] + xs[7]) / 2, 4.2, f"V = {config.vocab_size:,} logits at each masked position;\n"
            "the decoder is the word-embedding matrix, transposed (tied)", ha="center", fontsize=7.5)
    ax.text(xs[-1], 3.25, "no loss at\nother positions", ha="center", fontsize=7, color="#777777")
    return ax


TASK_PANELS = {
    "classification": ("single sentence → one label", ["[CLS]", "a", "great", "film", "[SEP]"], "cls"),
    "pair": ("sentence pair → one label", ["[CLS]", "A", "…", "[SEP]", "B", "…", "[SEP]"], "cls"),
    "tagging": ("one label per word (first piece)", ["[CLS]", "Jim", "lives", "in", "Rome", "[SEP]"], "each"),
    "qa": ("question + passage → answer span", ["[CLS]", "who", "?", "[SEP]", "Jim", "lives", "[SEP]"], "span"),
}


def task_heads(task: Optional[str] = None, config: Optional[BertConfig] = None, ax=None):
    """Where each fine-tuning head reads the encoder (Devlin et al. 2019, Figure 4): a linear
    layer on the pooled [CLS] for single sentences and pairs, one on every token for tagging,
    start and end logits on every passage token for QA. `task` None draws all four panels."""
    import matplotlib.pyplot as plt

    config = config or BertConfig.base()
    if task is None:
        fig, axes = plt.subplots(2, 2, figsize=(10, 5.6))
        for name, sub in zip(TASK_PANELS, axes.flat):
            task_heads(name, config, ax=sub)
        fig.tight_layout()
        return axes
    if task not in TASK_PANELS:
        raise ValueError(f"unknown task {task!r}; choose one of {', '.join(TASK_PANELS)}")
    title, tokens, reads = TASK_PANELS[task]
    ax = _axes(ax, figsize=(5.2, 2.9))
    _frame(ax, len(tokens) + 1.0, 4.1, title)
    xs = _encoder_with_outputs(ax, tokens, config)
    if reads == "cls":
        _box(ax, xs[0] + 0.7, 3.0, 2.4, 0.6, "pooled [CLS]\n→ K labels", "head", fontsize=7)
    elif reads == "each":
        for x, t in zip(xs[1:-1], tokens[1:-1]):
            _box(ax, x, 3.0, 0.9, 0.5, {"Jim": "B-PER", "Rome": "B-LOC"}.get(t, "O"), "head", fontsize=7)
    else:
        start = tokens.index("[SEP]") + 1
        for x in xs[start:-1]:
            _box(ax, x, 3.0, 0.9, 0.5, "start\nend", "head", fontsize=6.5)
        ax.text(xs[1], 3.0, "no answer\nin the question", ha="center", fontsize=6.5, color="#777777")
    return ax


# ---- the family --------------------------------------------------------------------------

# What each variant changes in BERT: (part, BERT's, the variant's); parts equal to BERT's are
# listed with None. Sources: Liu et al. 2019 (RoBERTa), Lan et al. 2020 (ALBERT),
# Sanh et al. 2019 (DistilBERT).
FAMILY: dict[str, list[tuple[str, str, Optional[str]]]] = {
    "roberta": [("vocabulary", "WordPiece, 30k, [UNK]", "byte-level BPE, 50k, no unknown"),
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
                   ("encoder", "12 layers", "6 layers, from every other\nteacher layer"),
                   ("pooler", "dense + tanh on [CLS]", "none"),
                   ("pretraining", "MLM + NSP", "distillation from BERT:\nsoft targets + MLM + cosine")],
}


def family_differences(name: str, ax=None):
    """A variant of BERT as what it changes: BERT's parts on the left, the variant's on the
    right, the changed ones highlighted and the unchanged ones dimmed."""
    if name not in FAMILY:
        raise ValueError(f"unknown variant {name!r}; choose one of {', '.join(FAMILY)}")
    rows = FAMILY[name]
    ax = _axes(ax, figsize=(6.4, 0.62 * len(rows) + 0.9))
    height = 0.9 * len(rows) + 0.9
    _frame(ax, 10.0, height)
    title = {"roberta": "RoBERTa", "albert": "ALBERT", "distilbert": "DistilBERT"}[name]
    ax.text(3.6, height - 0.35, "BERT", ha="center", fontsize=10, fontweight="bold")
    ax.text(7.7, height - 0.35, title, ha="center", fontsize=10, fontweight="bold")
    for i, (part, bert, other) in enumerate(rows):
        y = height - 1.05 - 0.9 * i
        ax.text(1.6, y, part, ha="right", va="center", fontsize=8.5)
        _box(ax, 3.6, y, 3.4, 0.7, bert, "plain", highlight=None if other else False, fontsize=7.5)
        _box(ax, 7.7, y, 3.6, 0.7, other or "the same", "head" if other else "plain",
             highlight=True if other else False, fontsize=7)
        _arrow(ax, (5.35, y), (5.85, y), color=HIGHLIGHT if other else "#aaaaaa")
    return ax
