"""bertedu.course.diagrams: every picture renders, says the sizes of its config, and highlights
what the lesson is about."""
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from bertedu import BertConfig  # noqa: E402
from bertedu.course import diagrams  # noqa: E402


def _texts(ax) -> str:
    return " ".join(t.get_text() for t in ax.texts) + " " + ax.get_title()


def _rendered(ax) -> None:
    fig = (ax.flat[0] if hasattr(ax, "flat") else ax).figure
    fig.canvas.draw()  # raises if anything cannot be drawn
    width, height = fig.canvas.get_width_height()
    assert width > 100 and height > 100
    plt.close(fig)


@pytest.mark.parametrize("notebook", sorted(diagrams.LESSON_PIECES))
def test_you_are_here_highlights_the_lessons_pieces(notebook):
    ax = diagrams.you_are_here(notebook)
    highlighted = {p.get_gid()[4:] for p in ax.patches if p.get_linewidth() > 2}
    dimmed = {p.get_gid()[4:] for p in ax.patches if p.get_alpha() < 1}
    assert highlighted == set(diagrams.LESSON_PIECES[notebook])
    assert not highlighted & dimmed and (notebook == 0 or dimmed)
    assert f"{notebook:02d}" in ax.get_title()
    _rendered(ax)


def test_sizes_come_from_the_config():
    tiny = _texts(diagrams.you_are_here(4, BertConfig.tiny()))
    assert "L = 2" in tiny and "H = 128" in tiny and "A = 2 heads" in tiny
    assert "L = 12" in _texts(diagrams.you_are_here(4))
    assert "(T, 64)" in _texts(diagrams.attention_flow())  # BERT-BASE's head dimension
    assert "(T, 32)" in _texts(diagrams.attention_flow(BertConfig.mini(num_attention_heads=8)))
    assert "30,522" in _texts(diagrams.pretraining_heads())
    assert "512→2048→512" in _texts(diagrams.encoder_blocks(BertConfig.small()))
    plt.close("all")


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


@pytest.mark.parametrize("task", [None, *diagrams.TASK_PANELS])
def test_task_heads_render(task):
    _rendered(diagrams.task_heads(task))


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
