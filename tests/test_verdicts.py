"""Every comparison in the lessons and appendices goes through the course's one verdict helper.

bertedu.course.stats (compare, compare_examples, from_estimate) decides when a difference
counts: the t distribution with the design's degrees of freedom, the test set's noise where
asked, a null that says what the design could detect. This file finds the verdicts a notebook
makes by hand instead:

- a threshold written out: `gap > 2 * se`, `abs(d / s) < 2`, `margins[k] > 2`;
- a verdict or a size in standard errors printed by a cell that calls no helper
  ("no measurable difference", "4.5 standard errors", "(3 SE)");
- a bootstrap or cluster standard error computed without handing it to the helper;
- prose that still states the old rule ("two standard errors") outside notebook 00, which
  teaches why it fails at three seeds.

A cell that computes a standard error for something other than ordering two methods (a
sampling tolerance, an error bar) says so with a comment `# not a verdict: <why>`.

Run `python tests/test_verdicts.py` to list every finding, one line each.
"""
from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted([*(REPO / "notebooks").glob("[0-9]*.ipynb"), *(REPO / "notebooks").glob("appendix/*.ipynb")])
TEACHES_THE_RULE = "00_course_map.ipynb"

HELPER = re.compile(r"\b(compare|compare_examples|from_estimate)\(")
EXEMPT = re.compile(r"#\s*not a verdict:")
SE_NAME = r"[\w\[\]'\".]*(?:se|spread|std|sd|sigma|error)\w*[\]\)]*"
THRESHOLD = [
    re.compile(r"\b2(?:\.0)?\s*\*\s*" + SE_NAME),  # 2 * se
    re.compile(SE_NAME + r"\s*\*\s*2(?:\.0)?\b"),  # se * 2
    re.compile(r"(?:margin|standard_errors|\bz\b|z\[|/\s*\w*se\b|seed_se|_z\b)[^#\n]*[<>]=?\s*-?2(?:\.0)?\s*(?:$|#|\)|,|:|\band\b|\bor\b)"),
]
PRINTED_VERDICT = re.compile(r"[\"'].*(?:no measurable difference|standard errors|\bSE\)|measurably)", re.I)
BOOTSTRAP = re.compile(r"\b(bootstrap_se|book_bootstrap)\(")
OLD_RULE = re.compile(r"\b(?:two|2) standard errors?\b|\b2 SE\b|\btwo-standard-error\b", re.I)


def code_lines(source: str) -> list[str]:
    """The code of a cell, comments removed (a threshold in a comment is prose)."""
    return [line.split("#", 1)[0] if not line.lstrip().startswith("#") else "" for line in source.splitlines()]


def findings(path: Path) -> list[str]:
    nb = json.loads(path.read_text(encoding="utf-8"))
    name = path.relative_to(REPO / "notebooks").as_posix()
    out = []
    for i, cell in enumerate(nb["cells"]):
        source = "".join(cell["source"])
        if cell["cell_type"] == "markdown":
            if path.name != TEACHES_THE_RULE and not name.startswith("appendix/00"):
                for match in OLD_RULE.finditer(source):
                    out.append(f"{name} c{i}: prose states the old rule ('{match.group(0)}'); say the helper's verdict")
            continue
        if cell["cell_type"] != "code" or EXEMPT.search(source):
            continue
        uses_helper = bool(HELPER.search(source))
        for line in code_lines(source):
            if any(p.search(line) for p in THRESHOLD):
                out.append(f"{name} c{i}: a threshold written out: {line.strip()[:90]}")
            if not uses_helper and PRINTED_VERDICT.search(line):
                out.append(f"{name} c{i}: prints a verdict or a size in SE without the helper: {line.strip()[:90]}")
            if not uses_helper and BOOTSTRAP.search(line):
                out.append(f"{name} c{i}: a bootstrap standard error not handed to the helper (from_estimate)")
    return out


def test_the_scan_catches_hand_made_verdicts():
    bad = ["assert gap > 2 * se", "assert abs(standard_errors(a, b)) < 2, (a, b)", "if margins[kind] > 2:",
           "ok = d > se * 2", "assert z[name, 'majority'] > 2"]
    good = ["assert not c.measurable", "x = 2 * hidden", "assert loss < 2.5", "print(compare(a, b))"]
    assert all(any(p.search(code_lines(line)[0]) for p in THRESHOLD) for line in bad)
    assert not any(any(p.search(code_lines(line)[0]) for p in THRESHOLD) for line in good)
    assert OLD_RULE.search("by more than two standard errors") and not OLD_RULE.search("4.3 standard errors")


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.relative_to(REPO / "notebooks").as_posix())
def test_every_comparison_goes_through_the_verdict_helper(path):
    found = findings(path)
    assert not found, "\n".join(found)


if __name__ == "__main__":
    every = [f for path in NOTEBOOKS for f in findings(path)]
    print("\n".join(every) or "no hand-made verdicts")
    sys.exit(1 if every else 0)
