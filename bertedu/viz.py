"""Pictures: attention heat maps, embedding tables, bertviz adapters.

Every function draws on a matplotlib Axes (made if not given) and returns it, so
notebooks can compose figures; `save_figure` writes a small PNG into figures/.
Introduced in notebooks 02-04.
"""

from __future__ import annotations

from pathlib import Path
from typing import Optional, Sequence

import torch

FIGURES_DIR = Path(__file__).resolve().parent.parent / "figures"


def _axes(ax=None, figsize=(4, 4)):
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


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
    ax.set_xticks(range(T), tokens, rotation=90)
    ax.set_yticks(range(T), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
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
):
    """A grid of heat maps, one row per layer and one column per head.

    attentions: the model's `attentions`, L tensors of (B, N, T, T).
    """
    import matplotlib.pyplot as plt

    layers = list(range(len(attentions))) if layers is None else list(layers)
    heads = list(range(attentions[0].shape[1])) if heads is None else list(heads)
    fig, axes = plt.subplots(len(layers), len(heads), figsize=(cell * len(heads), cell * len(layers)), squeeze=False)
    T = len(tokens)
    for r, layer in enumerate(layers):
        for c, head in enumerate(heads):
            ax = axes[r][c]
            ax.imshow(attentions[layer][batch_index, head, :T, :T].detach().float().cpu().numpy(), cmap="viridis", vmin=0, vmax=1)
            ax.set_xticks([])
            ax.set_yticks([])
            if r == 0:
                ax.set_title(f"head {head}", fontsize=8)
            if c == 0:
                ax.set_ylabel(f"layer {layer}", fontsize=8)
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
    """Write `fig` as figures/<name>.png (small: modest dpi, tight box) and return the path."""
    folder = FIGURES_DIR if folder is None else Path(folder)
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
    ax.set_xticks(range(T), tokens, rotation=90)
    ax.set_yticks(range(T), tokens)
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query")
    if title:
        ax.set_title(title)
    return ax


def use_cjk_font(sample: str = "我是谁") -> Optional[str]:
    """Let matplotlib draw Chinese characters, if an installed font can.

    Finds a font that has every character of `sample`, appends it to matplotlib's
    font.family as a fallback (Latin text keeps the current font) and returns its name;
    returns None when no installed font has the characters (label with pinyin instead).
    Introduced in notebook 03.
    """
    import matplotlib as mpl
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    wanted = {ord(c) for c in sample if not c.isspace()}
    hints = ("CJK", "Hei", "Song", "Ming", "Kai", "WenQuanYi", "Han", "SC", "TC", "Gothic", "PingFang")
    # Likely candidates first, so a machine with hundreds of fonts is still quick.
    entries = sorted(font_manager.fontManager.ttflist, key=lambda e: not any(h in e.name for h in hints))
    for entry in entries:
        if entry.name.startswith("Last Resort"):  # a placeholder box for every code point
            continue
        try:
            charmap = FT2Font(entry.fname).get_charmap()
        except (OSError, RuntimeError, ValueError):
            continue
        if wanted <= charmap.keys():
            families = list(mpl.rcParams["font.family"])
            if entry.name not in families:
                mpl.rcParams["font.family"] = families + [entry.name]
            return entry.name
    return None


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
