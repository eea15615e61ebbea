"""What makes a notebook a lesson and not a lab notebook, counted.

A lesson (notebooks/NN_*.ipynb) follows one thread: it opens with the "you are here" map
(`bertedu.course.diagrams.you_are_here`), keeps to about `MAX_WORDS` words of prose and
`MAX_CELLS` cells, no code cell longer than `MAX_CODE_LINES` lines, no test scaffolding in
sight (nbval's cell tags, not comments) and no git commands; and its exercises make the
learner think: none is answered by copying an earlier cell of the notebook. Studies and
records live in notebooks/appendix/ and docs/.

    python -m bertedu.course.lessons notebooks/      # the table: cells, words, pictures, exercises

tests/test_lessons.py holds every lesson to these limits. Introduced for the course's
maintainers (issue 51); learners never need it.
"""

from __future__ import annotations

import argparse
import builtins
import json
import keyword
import re
from pathlib import Path

MAX_WORDS, MAX_CELLS, MAX_CODE_LINES = 1800, 50, 30
# The Chinese edition (notebooks/zh/, bertedu.course.editions) counts a Chinese character as a word: the
# same prose takes more of them, so its limit is its own.
MAX_WORDS_BY_EDITION = {"en": MAX_WORDS, "zh": 3300}
COPIED = 0.5  # an exercise is "copied" when this share of its solution stands in one earlier cell
SHINGLE = 4  # ...counted in runs of this many code tokens

_FENCE = re.compile(r"^```.*?^```", re.S | re.M)
_MATH = re.compile(r"\$\$.*?\$\$|\$[^$\n]+\$", re.S)
_WORD = re.compile(r"[A-Za-z0-9\u00C0-\u024F]+(?:['’-][A-Za-z0-9]+)*|[\u4e00-\u9fff]")
_CODE_TOKEN = re.compile(r"\w+|[^\s\w]")
_GIT = re.compile(r"\bgit (?:checkout|clone|log|diff|show|reset|stash)\b")
_KEEP = set(dir(builtins)) | {"torch", "F", "nn", "np", "math"}
BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


def _source(cell) -> str:
    src = cell.get("source", "")
    return "".join(src) if isinstance(src, list) else src


def prose_words(markdown: str) -> int:
    """Words of prose: fenced code and LaTeX left out; a Chinese character counts as a word."""
    return len(_WORD.findall(_MATH.sub(" ", _FENCE.sub(" ", markdown))))


def solution_code(source: str) -> str:
    """The lines between the nbgrader solution markers."""
    inside, lines = False, []
    for line in source.splitlines():
        if line.strip() == BEGIN:
            inside = True
        elif line.strip() == END:
            inside = False
        elif inside:
            lines.append(line)
    return "\n".join(lines)


def _code_tokens(code: str) -> list[str]:
    """Code as tokens, comments left out, local names made alike ("v"): a retyped cell with its
    variables renamed is still a retyped cell. Attribute and keyword names stay."""
    code = "\n".join(line.split("#", 1)[0] for line in code.splitlines())
    tokens = _CODE_TOKEN.findall(code)
    return [("v" if t.isidentifier() and not keyword.iskeyword(t) and (i == 0 or tokens[i - 1] != ".")
             and t not in _KEEP else t) for i, t in enumerate(tokens)]


def _shingles(tokens: list[str], n: int = SHINGLE) -> set[tuple[str, ...]]:
    return {tuple(tokens[i : i + n]) for i in range(max(1, len(tokens) - n + 1))}


def copied_share(solution: str, earlier: list[str]) -> float:
    """The largest share of the solution's runs of `SHINGLE` tokens that one earlier code cell
    also holds: 1.0 for a cell retyped, near 0 for new code that only shares names."""
    mine = _shingles(_code_tokens(solution))
    if not _code_tokens(solution):
        return 0.0
    return max((len(mine & _shingles(_code_tokens(cell))) / len(mine) for cell in earlier), default=0.0)


def exercises(cells: list) -> list[dict]:
    """Each solution cell: its grade id, its kind (metadata bertedu.kind, e.g. "predict"), and the
    share of it copied from the cells before the exercises begin."""
    first = next((i for i, c in enumerate(cells) if "nbgrader" in c.get("metadata", {})), len(cells))
    earlier = [_source(c) for c in cells[:first] if c["cell_type"] == "code"]
    found = []
    for cell in cells:
        meta = cell.get("metadata", {})
        if meta.get("nbgrader", {}).get("solution"):
            found.append({"id": meta["nbgrader"].get("grade_id", "?"), "kind": meta.get("bertedu", {}).get("kind", ""),
                          "copied": round(copied_share(solution_code(_source(cell)), earlier), 2)})
    return found


def lesson_report(path: Path) -> dict:
    """Counts of one notebook: cells, prose words, longest code cell, pictures, exercises, scaffolding."""
    cells = json.loads(Path(path).read_text(encoding="utf-8"))["cells"]
    code = [_source(c) for c in cells if c["cell_type"] == "code"]
    markdown = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    outputs = json.dumps([c.get("outputs", []) for c in cells if c["cell_type"] == "code"])
    return {
        "edition": "zh" if Path(path).parent.name == "zh" else "en",
        "cells": len(cells),
        "words": prose_words(markdown),
        "longest_code": max((len(s.splitlines()) for s in code), default=0),
        "map_first": any("you_are_here(" in _source(c) for c in cells[:4]),
        "diagrams": sum(s.count("diagrams.") for s in code),
        "images": outputs.count('"image/png"'),
        "exercises": exercises(cells),
        "ignore_comments": sum("NBVAL_IGNORE_OUTPUT" in s for s in code),
        "git_commands": sum(bool(_GIT.search(s)) for s in code + [markdown, outputs]),
    }


def problems(report: dict) -> set[str]:
    """The limits a lesson breaks, by name."""
    found = set()
    if report["words"] > MAX_WORDS_BY_EDITION[report.get("edition", "en")]:
        found.add("words")
    if report["cells"] > MAX_CELLS:
        found.add("cells")
    if report["longest_code"] > MAX_CODE_LINES:
        found.add("code-lines")
    if not report["map_first"]:
        found.add("no-map")
    if any(e["copied"] >= COPIED for e in report["exercises"]):
        found.add("copied-exercise")
    if report["exercises"] and not any(e["kind"] == "predict" for e in report["exercises"]):
        found.add("no-predict")
    if report["ignore_comments"]:
        found.add("ignore-comments")
    if report["git_commands"]:
        found.add("git")
    return found


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Count what makes each notebook a lesson.")
    parser.add_argument("folder", type=Path)
    args = parser.parse_args(argv)
    print(f"{'notebook':40s} cells words longest pictures exercises (kind:copied)  problems")
    for path in sorted(args.folder.glob("*.ipynb")):
        r = lesson_report(path)
        ex = " ".join(f"{e['kind'] or '-'}:{e['copied']:.1f}" for e in r["exercises"])
        print(f"{path.name[:40]:40s} {r['cells']:5d} {r['words']:5d} {r['longest_code']:7d} "
              f"{r['images']:8d}  {ex:28s} {','.join(sorted(problems(r))) or '-'}")


if __name__ == "__main__":
    main()
