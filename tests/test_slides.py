"""Every notebook is a slide deck: its cells carry slide metadata, and nbconvert builds a reveal.js deck."""

import re
from pathlib import Path

import nbformat
import pytest

from bertedu.course import slides

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))
SLIDE_TYPES = {"slide", "subslide", "fragment", "-", "skip", "notes"}
# the notebooks tagged so far; the others gain their slide metadata as they are revised
TAGGED = ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14", "15", "16", "17"]


@pytest.mark.parametrize("prefix", TAGGED)
def test_every_cell_has_slide_metadata(prefix):
    paths = [p for p in ALL if p.name.startswith(prefix + "_")]
    if not paths:
        pytest.skip(f"notebook {prefix} not written yet")
    nb = nbformat.read(paths[0], as_version=4)
    kinds = [c.metadata.get("slideshow", {}).get("slide_type") for c in nb.cells]
    assert all(k in SLIDE_TYPES for k in kinds), f"cells without slide metadata: {[i for i, k in enumerate(kinds) if k not in SLIDE_TYPES]}"
    assert kinds[0] == "slide", "the title cell opens the deck"
    assert kinds == slides.slide_types(nb), "re-run `python -m bertedu.course.slides tag` after editing the notebook"


def test_rules_on_a_small_notebook():
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("# Title"),
        nbformat.v4.new_code_cell("import torch"),
        nbformat.v4.new_markdown_cell("## A section\nwords"),
        nbformat.v4.new_code_cell("x = 1"),
        nbformat.v4.new_code_cell("\n".join(["y = 2"] * 40)),
        nbformat.v4.new_markdown_cell("### Sub\nmore"),
    ])
    assert slides.slide_types(nb) == ["slide", "skip", "slide", "fragment", "skip", "subslide"]


def test_offline_assets_replace_every_cdn_url(tmp_path):
    decks = slides.build(ALL[0], tmp_path, assets="assets")
    html = decks[0].read_text(encoding="utf-8")
    for path in slides.ASSET_OPTIONS.values():
        assert f'"assets/{path}' in html or f"assets/{path}" in html, path
    assert not re.search(r'(src|href)="https?://', html), "a deck built with --assets must load nothing from the network"


def test_a_folder_of_chinese_lessons_builds_its_decks_and_not_its_subfolders(tmp_path, monkeypatch):
    """TEACHING.zh-CN.md's command: `build notebooks/zh/ decks/zh/` makes one deck per lesson of that folder
    (the Chinese text kept, UTF-8), and `build notebooks/ decks/` does not descend into notebooks/zh/."""
    src = tmp_path / "notebooks"
    (src / "zh").mkdir(parents=True)
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_markdown_cell("# 05 · 预训练数据：掩蔽语言模型"),
                                         nbformat.v4.new_code_cell("x = 1")])
    nbformat.write(nb, src / "zh" / "05_pretraining_data.ipynb")
    nb.cells[0].source = "# 05 · Pretraining data"
    nbformat.write(nb, src / "05_pretraining_data.ipynb")
    decks = slides.build(src / "zh", tmp_path / "decks" / "zh")
    assert [d.relative_to(tmp_path).as_posix() for d in decks] == ["decks/zh/05_pretraining_data.slides.html"]
    html = decks[0].read_text(encoding="utf-8")
    assert "预训练数据：掩蔽语言模型" in html and 'charset="utf-8"' in html.lower()
    commands = []
    monkeypatch.setattr(slides.subprocess, "run", lambda command, **kw: commands.append(command) or
                        slides.subprocess.CompletedProcess(command, 0))
    slides.build(src, tmp_path / "decks")  # the English folder: nbconvert is given its own lesson only
    assert [a for a in commands[0] if a.endswith(".ipynb")] == [str(src / "05_pretraining_data.ipynb")]


@pytest.mark.slow
def test_every_notebook_builds_a_reveal_deck(tmp_path):
    decks = slides.build(NOTEBOOKS, tmp_path)  # jupyter nbconvert --to slides, no execution
    assert [d.name for d in decks] == [p.stem + ".slides.html" for p in ALL]
    for deck, path in zip(decks, ALL):
        html = deck.read_text(encoding="utf-8")
        assert "Reveal.initialize" in html and "dist/reveal.js" in html, deck.name
        nb = nbformat.read(path, as_version=4)
        n_slides = sum(c.metadata.get("slideshow", {}).get("slide_type") == "slide" for c in nb.cells)
        if n_slides:  # a tagged notebook: one top-level <section> per slide
            sections = len(re.findall(r"<section\b", html))
            assert sections >= n_slides, f"{deck.name}: {sections} sections for {n_slides} slides"
