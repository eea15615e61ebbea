"""Where figures go (bertedu.course.viz.figures_dir, save_figure)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bertedu.course import viz  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_the_environment_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "pics"))
    monkeypatch.chdir(REPO / "notebooks")
    assert viz.figures_dir() == tmp_path / "pics"


def test_unless_asked_figures_go_to_a_temporary_folder(monkeypatch):
    """A lesson run by a learner leaves their checkout's tracked figures/ alone (issue 51)."""
    import tempfile

    monkeypatch.delenv(viz.FIGURES_ENV, raising=False)
    for folder in (REPO / "notebooks", REPO):
        monkeypatch.chdir(folder)
        path = viz.figures_dir()
        assert path.is_relative_to(tempfile.gettempdir()) and not path.is_relative_to(REPO)
        assert path.name == "figures"


def test_save_figure_writes_a_small_png_into_figures_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "figures"))
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    path = viz.save_figure(fig, "line", dpi=50)
    plt.close(fig)
    assert path == tmp_path / "figures" / "line.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 20_000
    assert viz.save_figure(fig, "there", folder=tmp_path / "elsewhere").parent == tmp_path / "elsewhere"


def _tick_texts(labels):
    return [t.get_text() for t in labels]


def test_attention_grid_names_queries_down_the_first_column_and_keys_along_the_bottom_row():
    import torch

    tokens = ["[CLS]", "cat", "sat", "[SEP]"]
    attentions = [torch.full((1, 3, 4, 4), 0.25) for _ in range(2)]  # L=2 x (B, N, T, T)
    fig = viz.attention_grid(attentions, tokens, heads=[0, 2], cell=1.5)
    axes = fig.axes  # row-major: layer 0 heads 0, 2; layer 1 heads 0, 2
    assert [_tick_texts(ax.get_yticklabels()) for ax in axes] == [tokens, [], tokens, []]
    assert [_tick_texts(ax.get_xticklabels()) for ax in axes] == [[], [], tokens, tokens]
    plt.close(fig)

    fig = viz.attention_grid(attentions, tokens, cell=1.5, token_labels="all")
    assert all(_tick_texts(ax.get_xticklabels()) == tokens == _tick_texts(ax.get_yticklabels()) for ax in fig.axes)
    plt.close(fig)


def test_attention_grid_leaves_out_labels_too_small_to_read():
    import pytest
    import torch

    tokens = [f"t{i}" for i in range(40)]
    attentions = [torch.full((1, 2, 40, 40), 1 / 40)]
    fig = viz.attention_grid(attentions, tokens, cell=0.7)  # 40 labels in 0.7 inch: under 5 pt each
    assert all(not ax.get_xticklabels() and not ax.get_yticklabels() for ax in fig.axes)
    plt.close(fig)
    with pytest.raises(ValueError, match="token_labels"):
        viz.attention_grid(attentions, tokens, token_labels="first")
