"""What every picture of the course shares: colours, boxes and arrows, labels that stay in their
boxes, and the names of the models they show.

    label_overflows(fig_or_ax)  every label that leaves its box (tests/test_diagrams.py runs it on every picture)
    KINDS, kind_of, model_name, model_sizes   what a picture calls a config: "all-MiniLM-L6-v2: 6 layers (H = 384)"
    translate_labels(fig_or_ax)  a picture's labels in the learner's language (`i18n`): Chinese from `labels_zh`
    in_learners_language        the decorator every picture function wears, so the Chinese edition's
                                `i18n.use("zh"); you_are_here(8)` draws the map labelled in Chinese

`diagrams.py` draws the architecture with these, `mechanisms.py` the mechanisms one lesson
explains. Introduced in notebook 00.
"""

from __future__ import annotations

import functools
import warnings
from typing import Callable, NamedTuple, Optional

from ..model.config import PRESETS, BertConfig
from . import i18n, labels_zh
from .fonts import cjk_font

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
        fig.bertedu_diagram = True  # shown as a palette PNG in a notebook (_show_diagrams_as_palette_png)
        _show_diagrams_as_palette_png()
    ax.set_axis_off()
    return ax


PALETTE = 64  # colours a diagram's PNG keeps: its flat boxes, text and their anti-aliased edges


def palette_png(fig) -> bytes:
    """`fig` as a PNG of at most `PALETTE` colours, at its own dpi and tight box: a diagram's flat
    colours need no more, and the file is about a third of the full-colour one, so a lesson with
    three 150-dpi pictures stays small."""
    import io

    from PIL import Image

    full = io.BytesIO()
    fig.canvas.print_figure(full, format="png", dpi=fig.dpi, bbox_inches="tight")
    small = io.BytesIO()
    Image.open(full).convert("RGB").quantize(colors=PALETTE).save(small, format="PNG", optimize=True)
    return small.getvalue()


def _show_diagrams_as_palette_png() -> None:
    """In IPython, show figures drawn by `_axes` with `palette_png` and every other figure as before
    (the inline backend's own printer). Does nothing outside IPython; safe to call again."""
    try:
        from IPython import get_ipython
        from matplotlib.figure import Figure
    except ImportError:
        return
    shell = get_ipython()
    if shell is None:
        return
    formatter = shell.display_formatter.formatters["image/png"]
    current = formatter.type_printers.get(Figure)
    if current is None or getattr(current, "bertedu", False):
        return

    def show(fig):
        return palette_png(fig) if getattr(fig, "bertedu_diagram", False) else current(fig)

    show.bertedu = True
    formatter.for_type(Figure, show)


def _box(ax, x: float, y: float, w: float, h: float, text: str, kind: str = "plain",
         highlight: Optional[bool] = None, fontsize: float = 8.5, gid: Optional[str] = None,
         verbatim: bool = False):
    """A rounded box centred on (x, y); highlight True draws it red-edged, False dims it.
    `verbatim`: its text is a token or a code name, the same in every language."""
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
            fontweight="bold" if highlight else "normal", gid=VERBATIM if verbatim else None)
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
    inside its box with `margin` pixels to spare; returns `ax`. Call it last: it draws. The
    labels are first put in the learner's language (`translate_labels`), so they fit as shown."""
    translate_labels(ax)
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


# ---- the learner's language ------------------------------------------------------------------

VERBATIM = "bertedu-verbatim"  # the gid of a text that no language changes: a token, a code name


def _texts_of(item) -> list:
    """The texts a reader reads in `item` (a Figure, an Axes, an array of Axes or a Legend): labels,
    titles, axis labels and legends; not tick labels (tokens or numbers in the course's pictures)."""
    from matplotlib.legend import Legend

    if isinstance(item, Legend):
        return [*item.get_texts(), item.get_title()]
    if hasattr(item, "flat"):
        return [t for ax in item.flat for t in _texts_of(ax)]
    if hasattr(item, "axes") and hasattr(item, "suptitle"):  # a Figure
        return [*item.texts, *(t for ax in item.axes for t in _texts_of(ax))]
    found = [*item.texts, item.title, item._left_title, item._right_title, item.xaxis.label, item.yaxis.label]
    return found + (_texts_of(item.get_legend()) if item.get_legend() is not None else [])


def translate_labels(fig_or_ax):
    """Put the labels of a picture (a Figure, an Axes, an array of Axes or a Legend) in the
    learner's language, `i18n.current()`, and return it. English: nothing changes. Chinese: each
    label the table `labels_zh` has is replaced, drawn with a font that has Chinese (the course's
    Noto Sans SC as a fallback after the label's own font); tokens and code names (texts marked
    `VERBATIM`) stay. Safe to call twice. Lessons call it on a plot of their own."""
    if i18n.current() != "zh":
        return fig_or_ax
    changed = [(t, labels_zh.translate(t.get_text())) for t in _texts_of(fig_or_ax)
               if t.get_gid() != VERBATIM and t.get_text().strip()]
    changed = [(t, chinese) for t, chinese in changed if chinese != t.get_text()]
    if not changed:
        return fig_or_ax
    font = cjk_font("".join(c for _, chinese in changed for c in chinese if _is_cjk(c)))
    if font is None:  # no font on this machine draws them: English labels rather than empty boxes
        warnings.warn("no font draws Chinese here: install pylopdf-fonts-zh-cn (the course's Noto Sans SC); "
                      "the picture keeps its English labels", stacklevel=2)
        return fig_or_ax
    for text, chinese in changed:
        _set_chinese(text, chinese, font)
    figure = changed[0][0].figure
    if figure is not None:  # anti-aliased Chinese glyphs add colours: shown as a palette PNG, as diagrams are
        figure.bertedu_diagram = True
        _show_diagrams_as_palette_png()
    return fig_or_ax


def _is_cjk(char: str) -> bool:
    """A character of the CJK blocks (ideographs, their punctuation, full-width forms)."""
    return "\u2e80" <= char <= "\u9fff" or "\uff00" <= char <= "\uffef"


def _set_chinese(text, chinese: str, font: str) -> None:
    """`text` shows `chinese`, its characters from `font` after the label's own font. Noto Sans SC
    has one weight: a bold label is drawn regular with a thin outline of its own colour (a bold
    that every glyph gets, and no 'weight not found' message from matplotlib)."""
    from matplotlib import patheffects

    text.set_text(chinese)
    families = list(text.get_fontfamily())
    text.set_fontfamily(families + [font] if font not in families else families)
    if text.get_fontweight() in ("bold", "heavy", "extra bold", "black") or (
            isinstance(text.get_fontweight(), int) and text.get_fontweight() >= 600):
        text.set_fontweight("normal")
        text.set_path_effects([patheffects.withStroke(linewidth=0.35, foreground=text.get_color())])


def in_learners_language(draw: Callable) -> Callable:
    """A picture function whose picture comes back labelled in the learner's language
    (`translate_labels` on what it returns: an Axes, an array of Axes or a Legend)."""
    @functools.wraps(draw)
    def drawn(*args, **kwargs):
        return translate_labels(draw(*args, **kwargs))
    return drawn


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
