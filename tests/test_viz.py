"""Where figures go (bertedu.viz.figures_dir, save_figure)."""

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from bertedu import viz  # noqa: E402

REPO = Path(__file__).resolve().parent.parent


def test_the_environment_variable_wins(tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "pics"))
    monkeypatch.chdir(REPO / "notebooks")
    assert viz.figures_dir() == tmp_path / "pics"


def test_inside_a_checkout_figures_go_to_its_figures_folder(monkeypatch):
    monkeypatch.delenv(viz.FIGURES_ENV, raising=False)
    monkeypatch.chdir(REPO / "notebooks")  # where the notebooks run
    assert viz.figures_dir() == REPO / "figures"
    monkeypatch.chdir(REPO)
    assert viz.figures_dir() == REPO / "figures"


def test_elsewhere_figures_go_to_the_current_folder(tmp_path, monkeypatch):
    monkeypatch.delenv(viz.FIGURES_ENV, raising=False)
    (tmp_path / "pyproject.toml").write_text("[project]\nname = 'not-bertedu'\n")  # a checkout of something else
    monkeypatch.chdir(tmp_path)
    assert viz.figures_dir() == tmp_path / "figures"


def test_save_figure_writes_a_small_png_into_figures_dir(tmp_path, monkeypatch):
    monkeypatch.setenv(viz.FIGURES_ENV, str(tmp_path / "figures"))
    fig, ax = plt.subplots(figsize=(2, 2))
    ax.plot([0, 1], [1, 0])
    path = viz.save_figure(fig, "line", dpi=50)
    plt.close(fig)
    assert path == tmp_path / "figures" / "line.png"
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and path.stat().st_size < 20_000
    assert viz.save_figure(fig, "there", folder=tmp_path / "elsewhere").parent == tmp_path / "elsewhere"
