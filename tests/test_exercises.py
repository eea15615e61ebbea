"""Every exercise's check passes on the stored solution and fails, with its message, on a wrong answer.

The exercise cells of a notebook (nbgrader cells: read-only set-up, solutions, checks) are
run here in one Python namespace, without the rest of the notebook: the exercises are
written to stand on their own after a kernel restart.
"""

import contextlib
import io
from pathlib import Path

import matplotlib
import nbformat
import pytest
import torch

from bertedu.course import exercises as ex

matplotlib.use("Agg")

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
ALL = sorted(NOTEBOOKS.glob("*.ipynb"))
WITH_EXERCISES = [p for p in ALL if ex.exercises(nbformat.read(p, as_version=4))]
# The notebooks that must carry exercises; the others gain theirs as they are revised.
REQUIRED = ["00", "01", "02", "03", "04", "05", "06", "07", "08", "09", "10", "11", "12", "13", "14", "15", "16", "17", "18", "19"]


def _run(source: str, namespace: dict) -> None:
    assert not any(line.lstrip().startswith(("%", "!")) for line in source.splitlines()), (
        "exercise cells must be plain Python (no magics), so they run outside Jupyter too"
    )
    with contextlib.redirect_stdout(io.StringIO()):
        exec(compile(source, "<exercise cell>", "exec"), namespace)


def _code_cells(nb) -> list[int]:
    return [i for i, c in enumerate(nb.cells) if c.cell_type == "code" and ex.is_exercise_cell(c)]


@pytest.mark.parametrize("prefix", REQUIRED)
def test_notebook_has_two_to_four_exercises(prefix):
    paths = [p for p in ALL if p.name.startswith(prefix + "_")]
    if not paths:
        pytest.skip(f"notebook {prefix} not written yet")
    nb = nbformat.read(paths[0], as_version=4)
    n = len(ex.exercises(nb)) + sum(
        1 for c in nb.cells if c.cell_type == "markdown" and ex.is_solution(c)
    )
    assert 2 <= n <= 4, f"{paths[0].name} has {n} exercises; the course asks for two to four"


@pytest.mark.parametrize("path", WITH_EXERCISES, ids=lambda p: p.name[:2])
def test_checks_pass_on_the_solutions_and_fail_on_wrong_answers(path):
    torch.manual_seed(0)
    nb = nbformat.read(path, as_version=4)
    cells = _code_cells(nb)
    found = ex.exercises(nb)
    checks = {i for e in found for i in e.checks}

    namespace: dict = {}
    for e in found:
        assert e.checks, f"{path.name} cell {e.solution}: a solution cell without a check cell after it"
        assert e.wrong_answer and e.expect, (
            f"{path.name} cell {e.solution}: store a wrong answer and the message its check prints "
            "in metadata.bertedu.wrong_answer / .expect"
        )
        before = [i for i in cells if i < e.solution and i not in checks]
        for i in before:
            if i not in namespace.setdefault("__ran__", set()):
                _run(nb.cells[i].source, namespace)
                namespace["__ran__"].add(i)
        snapshot = dict(namespace)

        # the stored solution passes its checks
        _run(nb.cells[e.solution].source, namespace)
        for i in e.checks:
            _run(nb.cells[i].source, namespace)
        namespace["__ran__"].add(e.solution)

        # a wrong answer fails the first check that can see it, with a message that says why
        wrong = dict(snapshot)
        wrong["__ran__"] = set(snapshot["__ran__"])
        _run(ex.with_wrong_answer(nb.cells[e.solution].source, e.wrong_answer), wrong)
        with pytest.raises(AssertionError) as failure:
            for i in e.checks:
                _run(nb.cells[i].source, wrong)
        message = str(failure.value)
        assert e.expect in message, f"{path.name} cell {e.solution}: expected {e.expect!r} in {message!r}"
        assert message.strip() not in ("", "False"), "a check must say what is wrong"


def test_learner_version_has_no_solutions(tmp_path):
    written = ex.strip(NOTEBOOKS, tmp_path)
    assert len(written) == len(ALL)
    for path in written:
        nb = nbformat.read(path, as_version=4)
        stored = nbformat.read(NOTEBOOKS / path.name, as_version=4)
        for cell, original in zip(nb.cells, stored.cells):
            assert ex.BEGIN not in cell.source and "bertedu" not in cell.metadata
            if ex.is_solution(original) and original.cell_type == "code":
                assert "raise NotImplementedError()" in cell.source
                assert cell.outputs == []
            elif not ex.is_solution(original):
                assert cell.source == original.source  # only solutions change


def test_unanswered_exercise_raises_not_implemented(tmp_path):
    """In the learner's copy, running a check before answering points at the exercise."""
    for path in WITH_EXERCISES[:1]:
        nb = ex.learner_version(nbformat.read(path, as_version=4))
        e = ex.exercises(nb)[0]
        with pytest.raises(NotImplementedError):
            _run(nb.cells[e.solution].source, {})


def test_checks_name_the_problem():
    with pytest.raises(ex.ExerciseError, match=r"has shape \(2, 3\), expected \(3, 2\)\nHint: transpose"):
        ex.check_close(torch.zeros(2, 3), torch.zeros(3, 2), "x", hint="transpose")
    with pytest.raises(ex.ExerciseError, match=r"first at index \(1,\): got 5, expected 2"):
        ex.check_close(torch.tensor([1.0, 5.0]), torch.tensor([1.0, 2.0]), "x")
    with pytest.raises(ex.ExerciseError, match=r"differs at position 2: got 'c', expected 'd'"):
        ex.check_equal(["a", "b", "c"], ["a", "b", "d"], "tokens")
    with pytest.raises(ex.ExerciseError, match=r"f\(<tensor \(2,\)>\): 1 of 2 values differ"):
        ex.check_function(lambda x: x * 2, lambda x: x + 1, [(torch.tensor([1.0, 2.0]),)], "f")
    with pytest.raises(ex.ExerciseError, match="is 0.5, expected 0.15"):
        ex.check_close(0.5, 0.15, "p")
    ex.check_close(torch.ones(2), [1.0, 1.0])
    ex.check_equal([1, 2], [1, 2])


def test_check_equal_says_which_item_is_missing_or_extra():
    sep_pair = ["[CLS]", "the", "cat", "[SEP]", "it", "slept", "[SEP]"]
    # the final [SEP] forgotten: name it and its position, not only the lengths
    with pytest.raises(ex.ExerciseError, match=r"has 6 items, expected 7: the item '\[SEP\]' at position 6 is missing"):
        ex.check_equal(sep_pair[:-1], sep_pair, "tokens")
    # the middle [SEP] forgotten: the rest is shifted by one, yet the one missing item is found
    with pytest.raises(ex.ExerciseError, match=r"the item '\[SEP\]' at position 3 is missing"):
        ex.check_equal(sep_pair[:3] + sep_pair[4:], sep_pair, "tokens")
    with pytest.raises(ex.ExerciseError, match=r"has 9 items, expected 7: the 2 items at positions 1-2 \('\[PAD\]', '\[PAD\]'\) should not be there"):
        ex.check_equal(sep_pair[:1] + ["[PAD]", "[PAD]"] + sep_pair[1:], sep_pair, "tokens")
    with pytest.raises(ex.ExerciseError, match=r"has 8 items, expected 7: the item 0 at position 7 should not be there"):
        ex.check_equal([0, 0, 0, 0, 1, 1, 1, 0], [0, 0, 0, 0, 1, 1, 1], "token_type_ids")
    # lengths differ and no missing or extra run explains it: the first difference, with both values
    with pytest.raises(ex.ExerciseError, match=r"has 3 items, expected 4: the first difference is at position 1: got 'x', expected 'b'"):
        ex.check_equal(["a", "x", "c"], ["a", "b", "c", "d"], "tokens")
    with pytest.raises(ex.ExerciseError, match=r"has 2 items, expected 4: the 2 items at positions 2-3 \('c', 'd'\) are missing"):
        ex.check_equal(["a", "b"], ["a", "b", "c", "d"], "tokens")
    # same length: the first differing position and how many differ
    with pytest.raises(ex.ExerciseError, match=r"differs at position 0: got 1, expected 0 \(2 of 3 positions differ\)"):
        ex.check_equal([1, 1, 0], [0, 0, 0], "ids")
    ex.check_equal(("a", "b"), ["a", "b"])  # a tuple equals the list with the same items


def test_strip_command_line(tmp_path, capsys):
    ex.main(["strip", str(ALL[0]), str(tmp_path)])
    assert (tmp_path / ALL[0].name).is_file()
    assert "wrote 1 learner notebooks" in capsys.readouterr().out


def test_learn_makes_copies_once_and_keeps_the_learners_work(tmp_path, capsys):
    """`python -m bertedu.course.exercises learn`: the README's one command for a learner."""
    import shutil

    src = tmp_path / "notebooks"
    (src / "appendix").mkdir(parents=True)
    shutil.copy(NOTEBOOKS / "00_course_map.ipynb", src / "00_course_map.ipynb")
    shutil.copy(NOTEBOOKS / "02_embeddings.ipynb", src / "appendix" / "a1.ipynb")
    out = tmp_path / "learner"
    ex.main(["learn", "--src", str(src), "--out", str(out), "--no-open"])
    assert "2 new copies" in capsys.readouterr().out
    copy = out / "00_course_map.ipynb"
    assert ex.BEGIN not in copy.read_text() and (out / "appendix" / "a1.ipynb").is_file()
    copy.write_text(copy.read_text().replace("# 00", "# 00 (my notes)"))  # the learner's own work
    mine = copy.read_text()
    ex.main(["learn", "--src", str(src), "--out", str(out), "--no-open"])
    assert "0 new copies" in capsys.readouterr().out and copy.read_text() == mine
