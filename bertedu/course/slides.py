"""Every notebook is also a slide deck: the slide metadata, and building reveal.js decks.

A teacher lectures from the same file a learner works through. Cells carry Jupyter's
standard ``metadata.slideshow.slide_type``, read both by RISE (``jupyterlab-rise``: present
live from JupyterLab, cells still runnable) and by ``jupyter nbconvert --to slides`` (a
static reveal.js deck). ``tag`` sets it by a few rules, once per notebook:

- a section heading (``#`` / ``##`` markdown) starts a new **slide**; a ``###`` heading a
  **subslide** (reveal.js's vertical stack under its section);
- the notebook's first code cell (imports, seeds, the scale switch) and other long code
  cells without a figure are **skip**ped: they run in RISE but are not presented;
- a code cell that follows prose is a **fragment**: the derivation unfolds one step per
  click, prose first, then the code that checks it;
- prose after a code cell continues the slide (``-``), unless the slide is already long,
  when it starts a subslide;
- the exercises are presented as one slide each (their title), the check cells skipped.

Build decks with ``python -m bertedu.course.slides build notebooks/ decks/``; tests/test_slides.py
checks that every notebook builds. By default nbconvert's decks load reveal.js, require.js
and MathJax from CDNs; without a network such a deck shows one long page (no slides, raw
LaTeX). ``--assets`` points them at local copies instead (see TEACHING.md), and RISE in
JupyterLab bundles its own reveal.js. Introduced in TEACHING.md.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path
from typing import Sequence

LONG_CODE_LINES = 30  # a code cell this long (and with no figure) is skipped in the deck
CELLS_PER_SLIDE = 4  # after this many cells, prose starts a new (sub)slide


def _has_figure(cell) -> bool:
    return any("image/png" in o.get("data", {}) for o in cell.get("outputs", []))


def slide_types(nb) -> list[str]:
    """The slide type of each cell of ``nb``, by the rules in the module docstring."""
    types: list[str] = []
    seen_code = False
    on_slide = 0  # cells on the current (sub)slide
    for cell in nb["cells"]:
        source = cell["source"].lstrip()
        nbgrader = cell.get("metadata", {}).get("nbgrader", {})
        if cell["cell_type"] == "markdown":
            if nbgrader.get("solution"):
                kind = "fragment"  # a written answer: revealed after the class has tried
            elif source.startswith(("# ", "## ")):
                kind = "slide"
            elif source.startswith("### "):
                kind = "subslide"
            elif types and types[-1] in ("fragment", "-", "skip") and on_slide >= CELLS_PER_SLIDE:
                kind = "subslide"
            else:
                kind = "-"
        else:
            first = not seen_code
            seen_code = True
            lines = source.count("\n") + 1
            if first or nbgrader.get("grade") or nbgrader.get("locked"):
                kind = "skip"  # set-up and checks: they run, but are not presented
            elif lines > LONG_CODE_LINES and not _has_figure(cell):
                kind = "skip"
            elif nbgrader.get("solution"):
                kind = "fragment"  # the teacher reveals the answer after the class has tried
            elif types and cell_before_is_prose(nb, len(types)):
                kind = "fragment"
            else:
                kind = "-"
        on_slide = 1 if kind in ("slide", "subslide") else on_slide + (kind != "skip")
        types.append(kind)
    return types


def cell_before_is_prose(nb, index: int) -> bool:
    return index > 0 and nb["cells"][index - 1]["cell_type"] == "markdown"


def tag(path: str | Path) -> dict[str, int]:
    """Write the slide metadata into the notebook at ``path``; returns a count per slide type."""
    import nbformat

    nb = nbformat.read(path, as_version=4)
    counts: dict[str, int] = {}
    for cell, kind in zip(nb.cells, slide_types(nb)):
        cell.metadata.setdefault("slideshow", {})["slide_type"] = kind
        counts[kind] = counts.get(kind, 0) + 1
    nbformat.write(nb, path)
    return counts


# Where a static deck finds its JavaScript when `assets` is given: the layout of
# `npm install reveal.js@4.0.2 requirejs@2 jquery@2 mathjax@2` (its node_modules folder).
ASSET_OPTIONS = {
    "SlidesExporter.reveal_url_prefix": "reveal.js",
    "SlidesExporter.require_js_url": "requirejs/require.js",
    "SlidesExporter.jquery_url": "jquery/dist/jquery.min.js",
    "SlidesExporter.mathjax_url": "mathjax/MathJax.js?config=TeX-AMS_CHTML-full,Safe",
}


def asset_flags(assets: str) -> list[str]:
    """nbconvert flags that load reveal.js, require.js, jQuery and MathJax from `assets`
    (a path relative to the deck, or a URL) instead of nbconvert's CDNs: decks that work offline."""
    return [f"--{option}={assets.rstrip('/')}/{path}" for option, path in ASSET_OPTIONS.items()]


def nbconvert_command(notebooks: Sequence[Path], out: Path, reveal_url_prefix: str | None = None,
                      assets: str | None = None) -> list[str]:
    """The ``jupyter nbconvert --to slides`` command for some notebooks (no execution)."""
    command = [
        sys.executable, "-m", "jupyter", "nbconvert", "--to", "slides", *map(str, notebooks),
        "--output-dir", str(out),
        "--SlidesExporter.reveal_scroll=True",  # long cells scroll instead of overflowing the slide
        "--SlidesExporter.reveal_number=c/t",
        # reveal.js scales a 1280 x 800 slide to the screen: a 100-character code line fits
        # (at nbconvert's default 960 px it was cut off at the right edge)
        "--SlidesExporter.reveal_width=1280",
        "--SlidesExporter.reveal_height=800",
    ]
    if assets:
        command += asset_flags(assets)
    if reveal_url_prefix:
        command.append(f"--SlidesExporter.reveal_url_prefix={reveal_url_prefix}")
    return command


def build(src: str | Path, out: str | Path, reveal_url_prefix: str | None = None,
          assets: str | None = None) -> list[Path]:
    """Build a reveal.js deck (``NAME.slides.html``) for every notebook in ``src``, in one nbconvert run."""
    src, out = Path(src), Path(out)
    paths = sorted(src.glob("*.ipynb")) if src.is_dir() else [src]
    if not paths:
        raise FileNotFoundError(f"no .ipynb files in {src}")
    out.mkdir(parents=True, exist_ok=True)
    result = subprocess.run(nbconvert_command(paths, out, reveal_url_prefix, assets), capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"building the decks failed:\n{result.stderr[-2000:]}")
    return [out / (path.stem + ".slides.html") for path in paths]


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.slides", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p_tag = sub.add_parser("tag", help="write slide metadata into notebooks")
    p_tag.add_argument("notebooks", nargs="+")
    p_build = sub.add_parser("build", help="build reveal.js decks with nbconvert")
    p_build.add_argument("src", help="a notebook or a folder of notebooks")
    p_build.add_argument("out", help="the folder for the .slides.html decks")
    p_build.add_argument("--reveal-url-prefix", default=None,
                         help="where reveal.js lives; default: nbconvert's CDN")
    p_build.add_argument("--assets", default=None,
                         help="a node_modules folder (relative to OUT, or a URL) holding reveal.js, requirejs, jquery "
                              "and mathjax: decks that work offline (see TEACHING.md)")
    args = parser.parse_args(argv)
    if args.command == "tag":
        for path in args.notebooks:
            print(Path(path).name, tag(path))
    else:
        decks = build(args.src, args.out, args.reveal_url_prefix, args.assets)
        print(f"built {len(decks)} decks in {args.out}")


if __name__ == "__main__":
    main()
