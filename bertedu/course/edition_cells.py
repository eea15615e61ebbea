"""The course's two editions, English (notebooks/) and Chinese (notebooks/zh/), kept in step.

A Chinese lesson has the English lesson's file name and its code: every code cell of the English
lesson, with its outputs, byte for byte and in order (a *mirrored* cell keeps the English cell's
id). The prose is the edition's own, written for its readers. Three kinds of cell, told apart by
``metadata.bertedu``:

- a markdown cell: the edition's prose; ``written_from`` names the English cell it was written
  from (``{"id", "sha"}``), so that ``check`` reports prose whose English has changed since;
- a mirrored code cell: equal to the English code cell of the same id (source, outputs,
  execution count, metadata); never edited by hand, carried over by ``sync``;
- an *own* code cell (``edition: "own"``): the edition's own code, for example the map labelled
  in Chinese, or a Chinese sentence for the learner to try. It may stand in for an English
  code cell (``replaces: {"id", "sha"}``). Own cells are self-contained (their own imports),
  so ``run`` executes them, and only them, in a fresh kernel: what is mirrored is checked by
  equality, not executed again (tests/test_editions.py).

The maintainers' commands over these (check, sync, run, dump, load) are `bertedu.course.editions`.

Introduced for the Chinese edition (issue 58).
"""

from __future__ import annotations

import copy
import hashlib
from pathlib import Path
from typing import Optional

REPOSITORY = Path(__file__).resolve().parents[2]
ENGLISH = REPOSITORY / "notebooks"
EDITIONS = {"zh": ENGLISH / "zh"}


def sha(text) -> str:
    """A short fingerprint of a cell's source."""
    text = "".join(text) if isinstance(text, list) else text
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def _meta(cell) -> dict:
    return cell.get("metadata", {}).get("bertedu", {})


def is_own(cell) -> bool:
    return cell.get("cell_type") == "code" and _meta(cell).get("edition") == "own"


def replaced_id(cell) -> Optional[str]:
    return (_meta(cell).get("replaces") or {}).get("id") if is_own(cell) else None


def lessons(lang: str = "zh") -> list[Path]:
    """The edition's lessons, in course order."""
    return sorted(EDITIONS[lang].glob("[0-9][0-9]_*.ipynb"))


def english_of(path: str | Path) -> Path:
    """The English lesson an edition's lesson is written from (the same file name)."""
    english = ENGLISH / Path(path).name
    if not english.exists():
        raise FileNotFoundError(f"{path}: no English lesson {english.relative_to(REPOSITORY)} of that name")
    return english


def lesson_path(lesson: str, lang: str = "zh", english: bool = False) -> Path:
    """notebooks/zh/08_*.ipynb (or the English one) from '08' or '8'."""
    matches = sorted(ENGLISH.glob(f"{int(lesson):02d}_*.ipynb"))
    if not matches:
        raise FileNotFoundError(f"no lesson {lesson!r} in {ENGLISH}")
    return matches[0] if english else EDITIONS[lang] / matches[0].name


def _read(path: Path):
    import nbformat

    return nbformat.read(path, as_version=4)


def _comparable(cell) -> dict:
    """What must be equal between a mirrored cell and its English cell: all but the execution count, which
    numbers the edition's own order (`numbered`)."""
    return {"id": cell.get("id"), "source": _source(cell), "outputs": cell.get("outputs", []),
            "metadata": cell.get("metadata", {})}


def numbered(nb) -> bool:
    """Number the code cells 1, 2, ... top to bottom, the order a learner runs them (the edition's own cells
    sit between the English ones); True when a count changed."""
    changed = False
    for count, cell in enumerate((c for c in nb.cells if c.cell_type == "code"), start=1):
        changed |= cell.get("execution_count") != count
        cell.execution_count = count
    return changed


def differences(path: str | Path) -> list[str]:
    """What is out of step between an edition's lesson and its English lesson (empty: in step)."""
    path = Path(path)
    en, nb = _read(english_of(path)), _read(path)
    english = {c.id: c for c in en.cells}
    en_code = [c for c in en.cells if c.cell_type == "code"]
    replaced = {replaced_id(c): c for c in nb.cells if replaced_id(c)}
    expected = [c for c in en_code if c.id not in replaced]
    mirrored = [c for c in nb.cells if c.cell_type == "code" and not is_own(c)]
    problems = []
    for k, (mine, theirs) in enumerate(zip(mirrored, expected)):
        if _comparable(mine) != _comparable(theirs):
            what = "source" if _source(mine) != _source(theirs) else "outputs or metadata"
            problems.append(f"{path.name}: code cell {mine.get('id')} differs from English cell {theirs.id} "
                            f"({what}); run `python -m bertedu.course.editions sync`")
            break
    if len(mirrored) != len(expected):
        problems.append(f"{path.name}: {len(mirrored)} mirrored code cells, English has {len(expected)} "
                        "(besides the ones own cells replace); run sync")
    for cell_id, own in replaced.items():
        if cell_id not in english:
            problems.append(f"{path.name}: own cell {own.get('id')} replaces English cell {cell_id}, which is gone")
        elif sha(english[cell_id].source) != _meta(own)["replaces"].get("sha"):
            problems.append(f"{path.name}: English cell {cell_id}, which own cell {own.get('id')} replaces, has "
                            "changed: update the own cell, then its replaces.sha")
    return problems + stale_prose(nb, english, path.name)


def stale_prose(nb, english: dict, name: str) -> list[str]:
    """Markdown cells written from an English cell that has changed (or gone) since."""
    problems = []
    for cell in nb.cells:
        origin = _meta(cell).get("written_from") if cell.cell_type == "markdown" else None
        if not origin:
            continue
        source = english.get(origin.get("id"))
        if source is None or sha(source.source) != origin.get("sha"):
            problems.append(f"{name}: prose cell {cell.get('id')} was written from English cell {origin.get('id')}, "
                            "which has changed since: revise it, then `load` it again")
    return problems


def sync(path: str | Path) -> list[str]:
    """Carry the English code cells into an edition's lesson: each mirrored cell becomes the English
    cell again; an English code cell the edition lacks is put after the cell mirroring the one
    before it; a mirrored cell whose English cell is gone is removed. Returns what changed."""
    import nbformat

    path = Path(path)
    en, nb = _read(english_of(path)), _read(path)
    replaced = {replaced_id(c) for c in nb.cells if replaced_id(c)}
    wanted = [c for c in en.cells if c.cell_type == "code" and c.id not in replaced]
    changes, cells, placed = [], [], set()
    by_id = {c.id: c for c in wanted}
    for cell in nb.cells:
        if cell.cell_type == "code" and not is_own(cell):
            if cell.get("id") not in by_id:
                changes.append(f"removed {cell.get('id')}")
                continue
            fresh = copy.deepcopy(by_id[cell.id])
            if _comparable(fresh) != _comparable(cell):
                changes.append(f"updated {cell.id}")
            placed.add(cell.id)
            cell = fresh
        cells.append(cell)
    for k, cell in enumerate(wanted):
        if cell.id in placed:
            continue
        before = wanted[k - 1].id if k else None
        at = next((i + 1 for i, c in enumerate(cells) if before and c.get("id") == before), len(cells) if before else 0)
        cells.insert(at, copy.deepcopy(cell))
        changes.append(f"added {cell.id}")
    nb.cells = cells
    if numbered(nb) or changes:
        nbformat.write(nb, path)
    return changes
