"""Pictures: attention heat maps, embedding tables, bertviz adapters.

Every function draws on a matplotlib Axes (made if not given) and returns it, so
notebooks can compose figures; `save_figure` writes a small PNG into `figures_dir()`. The masking
pictures speak the learner's language (`i18n`: titles, legend and row names in Chinese after
`i18n.use("zh")`; the tokens stay as they are).
Introduced in notebooks 02-04; MLM masking pictures and the masking explorer in notebook 05.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Optional, Sequence

import torch

from ..data.qa import invalid_spans
from ..training.curves import plot_metrics, read_metrics  # noqa: F401 (the course's names for them)
from .drawing import VERBATIM, in_learners_language
from .fonts import use_cjk_font  # noqa: F401 (lessons call viz.use_cjk_font)

FIGURES_ENV = "BERTEDU_FIGURES_DIR"


def figures_dir() -> Path:
    """Where `save_figure` writes: the folder named by $BERTEDU_FIGURES_DIR if set, else a
    folder `figures` in the system's temporary folder.

    A lesson's pictures are shown in the notebook; the files are a by-product, and writing
    them into the learner's checkout would change tracked files (re-plotted floats move
    antialiased edges by a fraction of a pixel: new bytes, the same picture). The course's
    tracked figures/ are refreshed by asking: BERTEDU_FIGURES_DIR="$PWD/figures".
    """
    configured = os.environ.get(FIGURES_ENV)
    if configured:
        return Path(configured)
    return Path(tempfile.gettempdir()) / "bertedu-figures" / "figures"


def _axes(ax=None, figsize=(4, 4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def _label_query_key(ax, tokens: Sequence[str]) -> None:
    """Token names on a (query x key) grid: queries down, keys across."""
    ax.set_xticks(range(len(tokens)), tokens, rotation=90)
    ax.set_yticks(range(len(tokens)), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")


def attention_heatmap(
    probs: torch.Tensor,
    tokens: Sequence[str],
    ax=None,
    title: Optional[str] = None,
    annotate: Optional[bool] = None,
    cmap: str = "viridis",
):
    """One (T, T) attention matrix: row = query token, column = key token it attends to."""
    probs = probs.detach().float().cpu()
    if probs.dim() != 2 or probs.shape[0] != probs.shape[1] or probs.shape[0] != len(tokens):
        raise ValueError(f"expected a ({len(tokens)}, {len(tokens)}) matrix, got {tuple(probs.shape)}")
    T = len(tokens)
    ax = _axes(ax, figsize=(0.45 * T + 1.5, 0.45 * T + 1.2))
    im = ax.imshow(probs.numpy(), cmap=cmap, vmin=0.0, vmax=1.0)
    _label_query_key(ax, tokens)
    if annotate if annotate is not None else T <= 6:
        for i in range(T):
            for j in range(T):
                v = probs[i, j].item()
                ax.text(j, i, f"{v:.2f}", ha="center", va="center", color="white" if v < 0.6 else "black", fontsize=9)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def attention_grid(
    attentions: Sequence[torch.Tensor],
    tokens: Sequence[str],
    layers: Optional[Sequence[int]] = None,
    heads: Optional[Sequence[int]] = None,
    batch_index: int = 0,
    cell: float = 1.8,
    token_labels: Optional[str] = None,
):
    """A grid of heat maps, one row per layer and one column per head.

    attentions: the model's `attentions`, L tensors of (B, N, T, T); tokens: the T token strings.
    In each square row i is query tokens[i] and column j the key it attends to.
    token_labels: "edges" names the queries down the first column and the keys along the
    bottom row (every square shares them); "all" names them on every square; "none" draws
    bare squares. None (default) means "edges" when a square of `cell` inches has room for
    T labels at a legible size (5 pt or more), else "none": give a larger `cell` to get them.
    Introduced in notebook 03; notebook 04 saves the labelled grid of all-MiniLM-L6-v2.
    """
    import matplotlib.pyplot as plt

    layers = list(range(len(attentions))) if layers is None else list(layers)
    heads = list(range(attentions[0].shape[1])) if heads is None else list(heads)
    T = len(tokens)
    fontsize = min(8.0, 0.8 * cell * 72 / max(T, 1))  # points: one line of text per token row
    if token_labels is None:
        token_labels = "edges" if fontsize >= 5 else "none"
    if token_labels not in ("edges", "all", "none"):
        raise ValueError(f'token_labels must be "edges", "all", "none" or None, not {token_labels!r}')
    fig, axes = plt.subplots(len(layers), len(heads), figsize=(cell * len(heads), cell * len(layers)), squeeze=False)
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(attentions[layer][batch_index, head, :T, :T].detach().float().cpu().numpy(), cmap="viridis", vmin=0, vmax=1)
            label_queries = token_labels == "all" or (token_labels == "edges" and c == 0)
            label_keys = token_labels == "all" or (token_labels == "edges" and r == len(layers) - 1)
            ax.set_yticks(range(T) if label_queries else [], tokens if label_queries else [], fontsize=fontsize)
            ax.set_xticks(range(T) if label_keys else [], tokens if label_keys else [], fontsize=fontsize, rotation=90)
            ax.tick_params(length=0, pad=1)
            if r == 0:
                ax.set_title(f"head {head}", fontsize=8)
            if c == 0:
                ax.set_ylabel(f"layer {layer}\nquery" if token_labels != "none" else f"layer {layer}", fontsize=8)
            if label_keys and c == 0:
                ax.set_xlabel("key", fontsize=8)
    fig.tight_layout()
    return fig


def embedding_table(table: torch.Tensor, ax=None, title: Optional[str] = None, xlabel="dimension", ylabel="position"):
    """A (rows, D) table as an image, e.g. position embeddings or the sinusoidal table."""
    ax = _axes(ax, figsize=(6, 3))
    im = ax.imshow(table.detach().float().cpu().numpy(), aspect="auto", cmap="RdBu_r")
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04)
    return ax


def bertviz_inputs(attentions: Sequence[torch.Tensor], batch_index: int = 0, length: Optional[int] = None):
    """bertviz wants a tuple of (1, N, T, T) tensors; slice one sequence (and drop padding)."""
    T = length if length is not None else attentions[0].shape[-1]
    return tuple(a[batch_index : batch_index + 1, :, :T, :T].detach().float().cpu() for a in attentions)


def save_figure(fig, name: str, folder: Optional[Path] = None, dpi: int = 110) -> Path:
    """Write `fig` as <name>.png (small: modest dpi, tight box) into `folder`, by default
    `figures_dir()`, and return the path."""
    folder = figures_dir() if folder is None else Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    fig.savefig(path, dpi=dpi, bbox_inches="tight")
    return path


def mask_heatmap(mask: torch.Tensor, tokens: Sequence[str], ax=None, title: Optional[str] = None):
    """A (T, T) boolean attention mask: row = query, column = key; blue = may attend, grey = hidden.

    Broadcast a padding mask first (`mask.expand(T, T)`). Introduced in notebook 03.
    """
    from matplotlib.colors import ListedColormap

    mask = mask.detach().bool().cpu()
    T = len(tokens)
    if tuple(mask.shape) != (T, T):
        raise ValueError(f"expected a ({T}, {T}) mask, got {tuple(mask.shape)}")
    ax = _axes(ax, figsize=(0.45 * T + 1.2, 0.45 * T + 1.2))
    ax.imshow(mask.float().numpy(), cmap=ListedColormap(["#d9d9d9", "#2c7fb8"]), vmin=0, vmax=1)
    _label_query_key(ax, tokens)
    if title:
        ax.set_title(title)
    return ax


@in_learners_language
def token_strip(
    tokens: Sequence[str],
    rows: dict,
    ax=None,
    title: Optional[str] = None,
    cmap: str = "Pastel1",
):
    """An encoded sequence as a strip of cells: one column per token, one row per field.

    rows: name -> one small int per token, e.g. {"token_type_ids": [...], "attention_mask": [...]};
    each cell is coloured by its value and shows it. Introduced in notebook 01.
    """
    import numpy as np

    T = len(tokens)
    names = list(rows)
    values = np.array([[int(v) for v in rows[name]] for name in names])  # (len(rows), T)
    if values.shape[1:] != (T,):
        raise ValueError(f"every row needs {T} values, one per token; got shape {values.shape}")
    ax = _axes(ax, figsize=(0.5 * T + 1.5, 0.45 * len(names) + 0.9))
    ax.imshow(values, cmap=cmap, vmin=0, vmax=max(8, int(values.max()) + 1), aspect="auto")
    for i in range(len(names)):
        for j in range(T):
            ax.text(j, i, str(values[i, j]), ha="center", va="center", fontsize=9)
    ax.set_xticks(range(T), tokens, rotation=90)
    ax.set_yticks(range(len(names)), names)
    ax.set_xticks(np.arange(T + 1) - 0.5, minor=True)
    ax.set_yticks(np.arange(len(names) + 1) - 0.5, minor=True)
    ax.grid(which="minor", color="white", linewidth=2)
    ax.tick_params(which="minor", length=0)
    if title:
        ax.set_title(title)
    return ax


# ----------------------------------------------------------------------------------------
# MLM masking pictures (introduced in notebook 05)
# ----------------------------------------------------------------------------------------

# What happened to each token, as `masking_outcomes` codes it.
MASKING_OUTCOMES = (
    "not selected",
    "selected → [MASK]",
    "selected → random",
    "selected → kept",
    "special (never selected)",
)
MASKING_COLOURS = ("#f2f2f2", "#4c72b0", "#dd8452", "#55a868", "#c8c8c8")


def masking_outcomes(
    input_ids: torch.Tensor,
    masked_ids: torch.Tensor,
    labels: torch.Tensor,
    mask_token_id: int,
    special_tokens_mask: Optional[torch.Tensor] = None,
) -> torch.Tensor:
    """Code each token by what masking did to it (indices into `MASKING_OUTCOMES`).

    0 not selected, 1 selected and replaced by [MASK], 2 selected and replaced by another
    token, 3 selected and left unchanged, 4 special (where `special_tokens_mask` is 1).
    Any shape; labels are -100 where not selected (`bertedu.data.mask_tokens`). A random
    replacement that happens to draw the original token (1 in ~30k) counts as kept.
    """
    input_ids, masked_ids, labels = (torch.as_tensor(t) for t in (input_ids, masked_ids, labels))
    selected = labels != -100
    codes = torch.zeros_like(input_ids)
    codes[selected & (masked_ids == mask_token_id)] = 1
    codes[selected & (masked_ids != mask_token_id) & (masked_ids != input_ids)] = 2
    codes[selected & (masked_ids == input_ids)] = 3
    if special_tokens_mask is not None:
        codes[torch.as_tensor(special_tokens_mask).bool()] = 4
    return codes


@in_learners_language
def masking_legend(ax, outcomes: Sequence[int] = (1, 2, 3, 0, 4), ncol: int = 5, **kwargs):
    """A legend of masking outcome colours below `ax`."""
    from matplotlib.patches import Patch

    handles = [Patch(facecolor=MASKING_COLOURS[o], edgecolor="#999999", label=MASKING_OUTCOMES[o]) for o in outcomes]
    options = {"loc": "upper center", "bbox_to_anchor": (0.5, 0.0), "ncol": ncol, "frameon": False, "fontsize": 8}
    options.update(kwargs)
    return ax.legend(handles=handles, **options)


def _glyph_filter(family: str = "monospace"):
    """A function that replaces the characters no available font can draw with "?".

    Random replacements can be any token of the vocabulary (Japanese, Arabic, ...);
    drawing one with a font that lacks it gives a box and a warning. The fonts asked
    are `family` and the named fonts of rcParams["font.family"] (e.g. a CJK font that
    `use_cjk_font` added), which matplotlib also falls back to.
    """
    import matplotlib as mpl
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    names = [family] + [f for f in mpl.rcParams["font.family"] if f not in ("serif", "sans-serif", "monospace", "cursive", "fantasy")]
    charmaps = []
    for name in names:
        try:
            path = font_manager.findfont(font_manager.FontProperties(family=name), fallback_to_default=False)
            charmaps.append(FT2Font(path).get_charmap())
        except (ValueError, OSError, RuntimeError):
            continue

    def drawable(text: str) -> str:
        return "".join(c if any(ord(c) in m for m in charmaps) else "?" for c in text)

    return names, drawable


def _wrap_cells(original_tokens: Sequence[str], input_tokens: Sequence[str], line_chars: float):
    """Lay token cells out in character units, wrapping like text: [(x, line, width)]."""
    cells, x, line = [], 0.0, 0
    for orig, inp in zip(original_tokens, input_tokens):
        width = max(len(orig), len(inp)) + 1.2
        if x > 0 and x + width > line_chars:
            x, line = 0.0, line + 1
        cells.append((x, line, width))
        x += width + 0.3
    return cells


@in_learners_language
def masking_strip(
    original_tokens: Sequence[str],
    input_tokens: Sequence[str],
    outcomes: Sequence[int],
    ax=None,
    title: Optional[str] = None,
    line_chars: int = 110,
    legend: bool = True,
):
    """A masked sequence as coloured cells: what the text was, and what the model sees.

    Tokens flow like text, wrapped every `line_chars` characters; each line shows the
    original tokens on top and the model's input below, each cell coloured by its outcome
    (`masking_outcomes`: not selected / [MASK] / random / kept / special).
    Introduced in notebook 05.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    T = len(original_tokens)
    outcomes = [int(o) for o in (outcomes.tolist() if hasattr(outcomes, "tolist") else outcomes)]
    if len(input_tokens) != T or len(outcomes) != T:
        raise ValueError(f"need one input token and one outcome per token: {T}, {len(input_tokens)}, {len(outcomes)}")
    families, drawable = _glyph_filter()
    original_tokens = [drawable(t) for t in original_tokens]
    input_tokens = [drawable(t) for t in input_tokens]
    label_chars = 7  # room for the row names "original" / "input"
    cells = _wrap_cells(original_tokens, input_tokens, line_chars)
    n_lines = cells[-1][1] + 1 if cells else 1
    used_chars = max((x + width for x, _, width in cells), default=1.0)  # the widest line
    row_height, line_height = 1.0, 2.6  # two rows per line, and a gap
    if ax is None:
        _, ax = plt.subplots(figsize=(0.078 * (used_chars + label_chars) + 0.3, 0.36 * line_height * n_lines + 0.5))
    for (x, line, width), orig, inp, outcome in zip(cells, original_tokens, input_tokens, outcomes):
        y = -line * line_height
        for row, text in ((0, orig), (1, inp)):
            top = y - row * (row_height + 0.1)
            ax.add_patch(
                Rectangle((label_chars + x, top - row_height), width, row_height,
                          facecolor=MASKING_COLOURS[outcome], edgecolor="#999999", linewidth=0.5)
            )
            dark = outcome in (1, 2, 3)
            ax.text(label_chars + x + width / 2, top - row_height / 2, text, ha="center", va="center",
                    fontsize=7.5, family=families, color="white" if dark else "black", gid=VERBATIM)
    for line in range(n_lines):
        y = -line * line_height
        ax.text(label_chars - 0.5, y - row_height / 2, "original", ha="right", va="center", fontsize=7, color="#555555")
        ax.text(label_chars - 0.5, y - 1.5 * row_height - 0.1, "input", ha="right", va="center", fontsize=7, color="#555555")
    ax.set_xlim(0, label_chars + used_chars)
    ax.set_ylim(-(n_lines - 1) * line_height - 2 * row_height - 0.2, 0.1)
    ax.axis("off")
    if title:
        ax.set_title(title, fontsize=10)
    if legend:
        masking_legend(ax)
    return ax


@in_learners_language
def draw_masking(
    tokenizer,
    text: str,
    seed: int = 0,
    mlm_probability: float = 0.15,
    whole_word: bool = False,
    ax=None,
    title: Optional[str] = None,
    max_length: int = 128,
    line_chars: int = 110,
    legend: bool = True,
):
    """Encode `text`, mask it with `bertedu.data.mask_tokens` and draw it with `masking_strip`.

    The mask is drawn from `torch.Generator().manual_seed(seed)`, so a seed always gives
    the same picture. With `whole_word`, the pieces of a word (`una ##ffa ##ble`) are
    selected together (each Chinese character counts as a word here: typed text has no
    word segmentation). What `masking_explorer` redraws. Introduced in notebook 05.
    """
    from bertedu.data import mask_tokens, wordpiece_word_ids

    enc = tokenizer.encode(text, max_length=max_length, truncation="longest_first")
    input_ids = torch.tensor(enc.input_ids)  # (T,)
    special = torch.tensor(enc.special_tokens_mask).bool()  # (T,)
    masked, labels = mask_tokens(
        input_ids,
        special,
        mask_token_id=tokenizer.mask_token_id,
        vocab_size=tokenizer.vocab_size,
        special_ids=tokenizer.special_ids,
        mlm_probability=mlm_probability,
        generator=torch.Generator().manual_seed(int(seed)),
        word_ids=wordpiece_word_ids(enc.tokens) if whole_word else None,
    )
    outcomes = masking_outcomes(input_ids, masked, labels, tokenizer.mask_token_id, special)
    if title is None:
        n = int((labels != -100).sum())
        kind = " (whole words)" if whole_word else ""
        title = f"p = {mlm_probability:.2f}, seed {seed}{kind}: {n} of {int((~special).sum())} tokens selected"
    return masking_strip(
        enc.tokens, tokenizer.convert_ids_to_tokens(masked), outcomes, ax=ax, title=title, line_chars=line_chars,
        legend=legend,
    )


def masking_explorer(
    tokenizer,
    text: str = "The quick brown fox jumps over the unaffable dog.",
    seed: int = 0,
    mlm_probability: float = 0.15,
    whole_word: bool = False,
):
    """An ipywidgets explorer of MLM masking: type a sentence, move the seed and the probability.

    Returns a widget box to display (the last expression of a notebook cell): a text box,
    a seed slider, a probability slider, a whole-word checkbox, and the `draw_masking`
    picture, redrawn on every change. Needs `ipywidgets` and a live kernel.
    Introduced in notebook 05.
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    text_box = widgets.Text(
        value=text, description="sentence", continuous_update=False, layout=widgets.Layout(width="95%")
    )
    seed_slider = widgets.IntSlider(value=seed, min=0, max=100, description="seed", continuous_update=False)
    p_slider = widgets.FloatSlider(
        value=mlm_probability, min=0.0, max=1.0, step=0.05, description="probability",
        readout_format=".2f", continuous_update=False,
    )
    whole_box = widgets.Checkbox(value=whole_word, description="whole-word masking")
    out = widgets.Output()

    def redraw(_=None):
        with out:
            out.clear_output(wait=True)
            if not text_box.value.strip():
                print("Type a sentence.")
                return
            draw_masking(tokenizer, text_box.value, seed_slider.value, p_slider.value, whole_box.value)
            plt.show()

    for widget in (text_box, seed_slider, p_slider, whole_box):
        widget.observe(redraw, names="value")
    redraw()
    return widgets.VBox([text_box, widgets.HBox([seed_slider, p_slider, whole_box]), out])


def span_score_map(
    start_logits: torch.Tensor,
    end_logits: torch.Tensor,
    tokens: Sequence[str],
    max_answer_length: int = 30,
    context_mask: Optional[Sequence[bool]] = None,
    show: Optional[Sequence[int]] = None,
    best: Optional[tuple[int, int]] = None,
    gold: Optional[tuple[int, int]] = None,
    ax=None,
    title: Optional[str] = None,
    start_mask: Optional[Sequence[bool]] = None,
):
    """Extractive QA's span scores as a (start x end) heat map. Introduced in notebook 11.

    start_logits, end_logits (T,) for one window; score[i, j] = start_logits[i] + end_logits[j].
    Spans that can never be answers are masked: end < start (dark grey), longer than
    max_answer_length tokens (light grey), or an end outside the context (context_mask
    (T,), white). `start_mask` (T,): where a span may start (the sliding window's
    max-context rule; rows outside it are white too). `show`: the token positions to
    draw (default all), `best` / `gold`: (start, end) marked with a box / a cross.
    """
    import numpy as np

    s, e = start_logits.detach().float().cpu(), end_logits.detach().float().cpu()
    T = s.shape[0]
    show = list(range(T)) if show is None else list(show)
    idx = torch.tensor(show)
    scores = (s[:, None] + e[None, :])[idx][:, idx].numpy()  # (S, S)
    rules = invalid_spans(T, max_answer_length, context_mask, start_mask)  # (T, T) each
    backwards, too_long, outside = (r[idx][:, idx].numpy() for r in rules)  # (S, S) each
    valid = ~(backwards | too_long | outside)
    ax = _axes(ax, figsize=(0.16 * len(show) + 2.2, 0.16 * len(show) + 1.2))
    shown = np.where(valid, scores, np.nan)
    im = ax.imshow(shown, cmap="viridis", vmin=np.nanmin(shown) if valid.any() else 0, vmax=np.nanmax(shown) if valid.any() else 1)
    grey = np.zeros((*scores.shape, 4))
    grey[backwards & ~outside] = (0.35, 0.35, 0.35, 1.0)
    grey[too_long & ~outside] = (0.8, 0.8, 0.8, 1.0)
    ax.imshow(grey)
    ax.set_xticks(range(len(show)), [tokens[t] for t in show], rotation=90, fontsize=7)
    ax.set_yticks(range(len(show)), [tokens[t] for t in show], fontsize=7)
    ax.set_xlabel("end token")
    ax.set_ylabel("start token")
    _mark_spans(ax, {t: k for k, t in enumerate(show)}, best, gold, max_answer_length)
    ax.figure.colorbar(im, ax=ax, fraction=0.046, pad=0.04, label="start + end logit")
    if title:
        ax.set_title(title)
    return ax


def _mark_spans(ax, pos: dict[int, int], best, gold, max_answer_length: int) -> None:
    """Box the best span, cross the gold one (where shown: pos maps token -> cell), add the legend."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if gold is not None and gold[0] in pos and gold[1] in pos:
        ax.plot(pos[gold[1]], pos[gold[0]], "x", color="red", markersize=9, mew=2, label="gold span")
    if best is not None and best[0] in pos and best[1] in pos:
        ax.add_patch(plt.Rectangle((pos[best[1]] - 0.5, pos[best[0]] - 0.5), 1, 1, fill=False, ec="orange", lw=2.5,
                                   label="best span"))
    handles = [Patch(color=(0.35, 0.35, 0.35), label="end < start"),
               Patch(color=(0.8, 0.8, 0.8), label=f"longer than {max_answer_length}")]
    handles += [h for h in ax.get_legend_handles_labels()[0]]
    ax.legend(handles=handles, fontsize=7, loc="lower left")


def sliding_windows(features: Sequence, answer: Optional[tuple[int, int]] = None, ax=None, title: Optional[str] = None):
    """The windows a long context was cut into, one bar per window, over the context's tokens.
    Introduced in notebook 11.

    features: a context's windows (`bertedu.data.qa.qa_features`; each has `offsets`, None
    outside the context, and `max_context`). The dark part of each bar is where that
    window is its tokens' max-context window (where an answer may start); the arrows show
    the stride between window starts. `answer`: (first, last) context token, drawn as a band.
    """
    all_offsets = sorted({tuple(o) for f in features for o in f.offsets if o is not None})
    index = {o: i for i, o in enumerate(all_offsets)}  # context token number, across windows
    ax = _axes(ax, figsize=(7, 0.45 * len(features) + 1.2))
    starts = []
    for w, f in enumerate(features):
        ids = [(index[tuple(o)], mc) for o, mc in zip(f.offsets, f.max_context) if o is not None]
        a, b = ids[0][0], ids[-1][0] + 1
        starts.append(a)
        ax.barh(w, b - a, left=a, height=0.6, color="tab:blue", alpha=0.3, label="window" if w == 0 else None)
        for t, mc in ids:
            if mc:
                ax.barh(w, 1, left=t, height=0.6, color="tab:blue", alpha=0.9, lw=0,
                        label="its max-context tokens" if (w, t) == (0, ids[0][0]) else None)
        ax.text(b + 1, w, f"{a}-{b - 1}", va="center", fontsize=8)
    for w in range(1, len(starts)):
        ax.annotate("", xy=(starts[w], w - 0.45), xytext=(starts[w - 1], w - 0.45),
                    arrowprops={"arrowstyle": "->", "color": "k", "lw": 1})
        ax.text((starts[w] + starts[w - 1]) / 2, w - 0.52, f"stride {starts[w] - starts[w - 1]}", ha="center",
                va="bottom", fontsize=7)
    if answer is not None:
        ax.axvspan(answer[0] - 0.5, answer[1] + 0.5, color="tab:red", alpha=0.3, label="answer")
    ax.set_yticks(range(len(features)), [f"window {w}" for w in range(len(features))])
    ax.invert_yaxis()
    ax.set_xlim(-1, len(all_offsets) * 1.1 + 2)
    ax.set_xlabel("context token")
    ax.legend(fontsize=7, loc="upper right")  # top right: the first windows sit top left
    if title:
        ax.set_title(title)
    return ax
