"""Pictures of one mechanism each, drawn from the config and inputs a lesson uses.

    multihead_reshape(...)      (B, T, D) -> (B, N, T, Dh): how one projection becomes N heads (04)
    position_rows_trained(...)  which position-embedding rows each pretraining phase trains (07)
    memory_split(...)           weights, gradients, Adam moments and activations of a step (07)
    continuation_labels(...)    a word cut into pieces, its continuation piece labelled -100 (09)
    padded_vs_packed(...)       the same sequences padded to a batch and packed into rows (12)
    checkpoint_to_head(...)     what from_pretrained loads, initialises and drops (13)

Every function draws on a matplotlib Axes (made if not given) and returns it, with every label
inside its box, in the learner's language (`drawing.in_learners_language`); `diagrams` re-exports
them, so a lesson calls `diagrams.multihead_reshape(...)`.
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..model.config import BertConfig
from .drawing import (
    COLORS, DPI, VERBATIM, _arrow, _axes, _box, _fit_labels, _frame, in_learners_language, model_name, model_sizes,
)


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


@in_learners_language
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
        ax.text((x0 + x1) / 2, top + 0.6, code, ha="center", fontsize=8, family="monospace", gid=VERBATIM)
    ax.text(7.5, 0.2, f"one of the B = {B} sequences; view and transpose move no number in memory, "
            "they index the same numbers anew", ha="center", fontsize=7.5, style="italic")
    return _fit_labels(ax)


@in_learners_language
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


@in_learners_language
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


@in_learners_language
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
        _box(ax, (span[0] + span[-1]) / 2, 3.1, span[-1] - span[0] + 1.05, 0.55, word, "text", fontsize=8.5,
             verbatim=True)
    for x, (piece, owner, label) in zip(xs, columns):
        _box(ax, x, 2.0, 1.05, 0.55, piece, "tokens", fontsize=8.5, verbatim=True)
        continuation = owner is not None and label == "-100"
        _box(ax, x, 0.9, 1.05, 0.55, label, "head" if label != "-100" else "plain",
             highlight=True if continuation else (False if owner is None else None), fontsize=8.5, verbatim=True)
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


@in_learners_language
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


@in_learners_language
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
