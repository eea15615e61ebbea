"""The pictures in figures/ are the lessons' own stored outputs, copied out, never drawn twice.

A lesson cell whose picture the README, TEACHING.md or the slides show carries the cell metadata
`{"bertedu": {"figure": "<name>"}}`; nothing in its code says so, so the learner reads only the
plot. `python -m bertedu.course.figures` writes each such cell's stored PNG output to
figures/<name>.png, byte for byte; `--check` only compares (tests/test_docs.py runs it), so a
picture in the README is always the one the executed lesson shows.
"""

from __future__ import annotations

import argparse
import base64
import json
from pathlib import Path
from typing import Sequence

REPO = Path(__file__).resolve().parents[2]
KEY = "figure"


def tagged_figures(notebook: str | Path) -> dict[str, bytes]:
    """{name: PNG bytes} of every cell of `notebook` tagged with a figure name: the cell's last
    stored image/png output. A tagged cell without one is an error (execute the notebook)."""
    cells = json.loads(Path(notebook).read_text(encoding="utf-8"))["cells"]
    found = {}
    for i, cell in enumerate(cells):
        name = cell.get("metadata", {}).get("bertedu", {}).get(KEY)
        if not name:
            continue
        images = [o["data"]["image/png"] for o in cell.get("outputs", []) if "image/png" in o.get("data", {})]
        if not images:
            raise ValueError(f"{notebook}: cell {i} is tagged figure {name!r} but stores no PNG output: execute it")
        png = images[-1]
        found[name] = base64.b64decode("".join(png) if isinstance(png, list) else png)
    return found


def sync(notebooks: Sequence[str | Path], out: str | Path, check: bool = False) -> list[str]:
    """Write (or with `check`, only compare) figures/<name>.png for every tagged cell; return the
    names that were written (or that differ)."""
    out = Path(out)
    changed = []
    for notebook in notebooks:
        for name, png in tagged_figures(notebook).items():
            path = out / f"{name}.png"
            if path.exists() and path.read_bytes() == png:
                continue
            changed.append(name)
            if not check:
                out.mkdir(parents=True, exist_ok=True)
                path.write_bytes(png)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.figures", description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="*", help="notebooks to read (default: every lesson and appendix)")
    parser.add_argument("--out", default=str(REPO / "figures"), help="the folder of the pictures (default: figures/)")
    parser.add_argument("--check", action="store_true", help="only say which pictures differ from the lessons'")
    args = parser.parse_args(argv)
    notebooks = args.notebooks or sorted([*(REPO / "notebooks").glob("*.ipynb"),
                                          *(REPO / "notebooks").glob("appendix/*.ipynb")])
    changed = sync(notebooks, args.out, check=args.check)
    verb = "differ from the lessons' stored outputs" if args.check else "written"
    print(f"{len(changed)} pictures {verb}" + (": " + ", ".join(changed) if changed else ""))
    return 1 if args.check and changed else 0


if __name__ == "__main__":
    raise SystemExit(main())
