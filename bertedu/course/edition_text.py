"""A lesson of another edition as one text file to write its prose in, and back (``editions dump/load``).

``dump 08`` prints notebooks/zh/08_*.ipynb (or, before it exists, the English lesson) as markdown
with a marker line before each cell:

    <!-- markdown 3f2a9c1e -->        the prose of a cell (keep the id: it records the English cell
                                       the prose was written from); ``<!-- markdown new -->`` adds one
    <!-- code 7b1d0e44 -->            a mirrored English code cell: shown for reading, its text is
                                       ignored by ``load`` (the code is the English lesson's)
    <!-- own -->                      the edition's own code cell, its code in a ```python fence;
    <!-- own replaces 7b1d0e44 -->    ... standing in for that English code cell

``load 08`` reads such a file from stdin and writes notebooks/zh/08_*.ipynb: the prose as written,
every English code cell (or the own cell replacing it) in the English order, own cells with the
outputs they had if their code is unchanged (``editions run --write`` executes new ones).
"""

from __future__ import annotations

import copy
import re
import sys

from .edition_cells import _meta, _read, _source, is_own, lesson_path, numbered, replaced_id, sha

MARKER = re.compile(r"^<!-- (markdown|code|own)(?: (replaces )?([\w-]+))? -->$", re.M)
FENCE = re.compile(r"```python\n(.*?)\n```", re.S)
OUTPUT_LINES = 12


def _outputs_text(cell) -> str:
    lines = []
    for out in cell.get("outputs", []):
        text = out.get("text") or out.get("data", {}).get("text/plain", "")
        text = "".join(text) if isinstance(text, list) else text
        lines += text.splitlines() if "image/png" not in out.get("data", {}) else ["<picture>"]
    shown = lines[:OUTPUT_LINES] + ([f"... ({len(lines) - OUTPUT_LINES} more lines)"] if len(lines) > OUTPUT_LINES else [])
    return "\n".join(shown)


LINK = re.compile(r"(\]\(|src=\")(?!https?:|#|mailto:)([^)\s\"]+)")


def relinked(markdown: str) -> str:
    """An English lesson's relative links as seen from notebooks/zh/: ../docs/x.md -> ../../docs/x.md,
    appendix/x.ipynb -> ../appendix/x.ipynb; a sibling lesson (08_x.ipynb) is the Chinese one."""
    def fix(match):
        target = match.group(2)
        if target.startswith("../") or target.startswith("appendix/"):
            target = "../" + target
        return match.group(1) + target
    return LINK.sub(fix, markdown)


def dump(lesson: str) -> str:
    path = lesson_path(lesson)
    nb = _read(path if path.exists() else lesson_path(lesson, english=True))
    parts = []
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            text = _source(cell) if path.exists() else relinked(_source(cell))
            parts.append(f"<!-- markdown {cell.id} -->\n{text}")
            continue
        if is_own(cell):
            head = f"<!-- own replaces {replaced_id(cell)} -->" if replaced_id(cell) else "<!-- own -->"
        else:
            head = f"<!-- code {cell.id} -->"
        body = f"```python\n{_source(cell)}\n```"
        output = _outputs_text(cell)
        parts.append(f"{head}\n{body}" + (f"\n```text\n{output}\n```" if output else ""))
    return "\n\n".join(parts) + "\n"


def _segments(text: str) -> list[tuple[str, str | None, bool, str]]:
    """(kind, id, replaces, body) for each marked cell of a dumped text."""
    marks = list(MARKER.finditer(text))
    if not marks:
        raise ValueError("no cell markers (<!-- markdown ID -->, <!-- code ID -->, <!-- own -->) in the text")
    out = []
    for k, mark in enumerate(marks):
        end = marks[k + 1].start() if k + 1 < len(marks) else len(text)
        out.append((mark.group(1), mark.group(3), bool(mark.group(2)), text[mark.end():end].strip("\n")))
    return out


def _own_cell(nbformat, body: str, replaces, english: dict, previous: dict):
    fence = FENCE.search(body)
    if not fence:
        raise ValueError(f"an own cell needs its code in a ```python fence:\n{body[:200]}")
    source = fence.group(1)
    old = previous.get(source)
    cell = copy.deepcopy(old) if old is not None else nbformat.v4.new_code_cell(source)
    meta = {"edition": "own"}
    if replaces:
        if replaces not in english or english[replaces].cell_type != "code":
            raise ValueError(f"own replaces {replaces}: the English lesson has no code cell of that id")
        meta["replaces"] = {"id": replaces, "sha": sha(english[replaces].source)}
    cell.metadata.setdefault("bertedu", {}).update(meta)
    return cell


def _markdown_cell(nbformat, cell_id, body: str, english: dict, previous: dict):
    old = previous.get(cell_id)
    if old is not None:
        cell = copy.deepcopy(old)
    elif cell_id in english:
        cell = copy.deepcopy(english[cell_id])
    else:
        cell = nbformat.v4.new_markdown_cell("")
    cell.source = body
    origin = _meta(cell).get("written_from") or ({"id": cell_id} if cell_id in english else None)
    if origin and origin["id"] in english:
        cell.metadata.setdefault("bertedu", {})["written_from"] = {
            "id": origin["id"], "sha": sha(english[origin["id"]].source)}
    return cell


def load(lesson: str, text: str) -> list[str]:
    """Write notebooks/zh/<lesson> from a dumped text; returns the English code cells it misplaced (none)."""
    import nbformat

    path, en_path = lesson_path(lesson), lesson_path(lesson, english=True)
    en = _read(en_path)
    english = {c.id: c for c in en.cells}
    old = _read(path) if path.exists() else en
    prev_md = {c.id: c for c in old.cells if c.cell_type == "markdown"}
    prev_own = {_source(c): c for c in old.cells if is_own(c)}
    cells, seen = [], []
    for kind, cell_id, replaces, body in _segments(text):
        if kind == "markdown":
            cell = _markdown_cell(nbformat, None if cell_id == "new" else cell_id, body, english, prev_md)
            if cell.id in {c.id for c in cells}:  # a cell split in two: the second part gets an id of its own
                cell.id = nbformat.v4.new_markdown_cell("").id
            cells.append(cell)
        elif kind == "code":
            if cell_id not in english or english[cell_id].cell_type != "code":
                raise ValueError(f"code {cell_id}: the English lesson has no code cell of that id")
            cells.append(copy.deepcopy(english[cell_id]))
            seen.append(cell_id)
        else:
            cells.append(_own_cell(nbformat, body, cell_id if replaces else None, english, prev_own))
            seen += [cell_id] if replaces else []
    wanted = [c.id for c in en.cells if c.cell_type == "code"]
    if seen != wanted:
        missing = [i for i in wanted if i not in seen]
        raise ValueError(f"the English code cells must each appear once, in order (as code or own replaces): "
                         f"missing {missing}, order {'differs' if not missing else 'ok'}")
    nb = copy.deepcopy(en)
    nb.cells = cells
    _tag_slides(nb)
    numbered(nb)
    nb.metadata.setdefault("bertedu", {})["edition"] = path.parent.name
    path.parent.mkdir(parents=True, exist_ok=True)
    nbformat.write(nb, path)
    return []


def _tag_slides(nb) -> None:
    """Slide metadata (bertedu.course.slides' rules) on the edition's own cells, prose and code; a mirrored
    cell keeps the English cell's, as it keeps everything else of it."""
    from .slides import slide_types

    for cell, kind in zip(nb.cells, slide_types(nb)):
        if cell.cell_type == "markdown" or is_own(cell):
            cell.metadata.setdefault("slideshow", {})["slide_type"] = kind


def main(command: str, lesson: str) -> int:
    if command == "dump":
        sys.stdout.write(dump(lesson))
        return 0
    load(lesson, sys.stdin.read())
    print(f"wrote {lesson_path(lesson).relative_to(lesson_path(lesson).parents[2])}", file=sys.stderr)
    return 0
