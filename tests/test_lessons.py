"""Every lesson is a lesson, not a lab notebook (issue 51), counted by bertedu.course.lessons:
at most MAX_WORDS words of prose and MAX_CELLS cells, no code cell over MAX_CODE_LINES lines,
the "you are here" map among its first cells, at least one predict-then-check exercise, no
exercise answered by copying an earlier cell, no NBVAL_IGNORE_OUTPUT comments (nbval's cell
tags instead), no git commands.

`NOT_YET` lists what each lesson still breaks. It is exact: a lesson that breaks something new
fails, and so does one that has been mended until its entry is removed, so the list only shrinks.
"""
from pathlib import Path

import pytest

from bertedu.course.lessons import COPIED, lesson_report, problems

LESSONS = sorted((Path(__file__).resolve().parents[1] / "notebooks").glob("[0-9][0-9]_*.ipynb"))

NOT_YET = {
}


def test_not_yet_names_only_lessons():
    assert set(NOT_YET) <= {p.name[:2] for p in LESSONS}, "NOT_YET names a lesson that does not exist"


@pytest.mark.parametrize("path", LESSONS, ids=lambda p: p.name[:2])
def test_lesson_limits(path):
    report = lesson_report(path)
    found, known = problems(report), NOT_YET.get(path.name[:2], set())
    detail = {"words": report["words"], "cells": report["cells"], "longest code cell": report["longest_code"],
              "exercises": report["exercises"]}
    assert not found - known, f"{path.name} now also breaks {sorted(found - known)}: {detail}"
    assert not known - found, f"{path.name} no longer breaks {sorted(known - found)}: remove it from NOT_YET"


def test_copied_exercise_is_caught():
    """The measure on a made-up notebook: a solution retyped from a cell above (renamed) is
    flagged; one that computes something new from the same names is not."""
    from bertedu.course.lessons import copied_share

    shown = "scores = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])\nprobs = scores.softmax(dim=-1)\nout = probs @ v"
    retyped = "s = query @ key.transpose(-2, -1) / math.sqrt(query.shape[-1])\np = s.softmax(dim=-1)\nresult = p @ value"
    new = "entropy = -(probs * probs.clamp_min(1e-9).log()).sum(-1)\nflattest = entropy.argmax().item()"
    assert copied_share(retyped, [shown]) >= COPIED > copied_share(new, [shown])
