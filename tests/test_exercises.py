"""Every exercise's check passes on the stored solution and fails, with its message, on a wrong answer.

The exercise cells of a notebook (nbgrader cells: read-only set-up, solutions, checks) are
run here in one Python namespace, without the rest of the notebook: the exercises are
written to stand on their own after a kernel restart.
"""

import ast
import contextlib
import io
import re
from pathlib import Path

import matplotlib
import nbformat
import pytest
import torch

from bertedu.course import exercises as ex
from bertedu.course import i18n
from bertedu.course.exercise_hints_zh import HINTS as HINTS_ZH
from bertedu.course.exercise_hints_zh import NAMES as NAMES_ZH
from bertedu.course.exercise_messages import hints_in, in_words, names_in, say

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

        # a wrong answer fails the first check that can see it, with a message that says why,
        # and says the same in Chinese (the same draws: the random state is put back between the two)
        state = _random_state()
        message = _wrong_answer_message(nb, e, snapshot)
        assert e.expect in message, f"{path.name} cell {e.solution}: expected {e.expect!r} in {message!r}"
        assert message.strip() not in ("", "False"), "a check must say what is wrong"
        _random_state(state)
        with i18n.speaking("zh"):
            _assert_said_in_chinese(message, _wrong_answer_message(nb, e, snapshot), f"{path.name} cell {e.solution}")


def _wrong_answer_message(nb, e: ex.Exercise, snapshot: dict) -> str:
    """The message of the first check that fails on the exercise's stored wrong answer."""
    wrong = dict(snapshot)
    wrong["__ran__"] = set(snapshot["__ran__"])
    _run(ex.with_wrong_answer(nb.cells[e.solution].source, e.wrong_answer), wrong)
    with pytest.raises(AssertionError) as failure:
        for i in e.checks:
            _run(nb.cells[i].source, wrong)
    return str(failure.value)


def _random_state(state=None):
    """The random generators' state (torch, numpy, random), or put ``state`` back."""
    import random

    import numpy as np

    if state is None:
        return torch.get_rng_state(), np.random.get_state(), random.getstate()
    torch.set_rng_state(state[0])
    np.random.set_state(state[1])
    random.setstate(state[2])


HAN = re.compile(r"[\u4e00-\u9fff]")


def _assert_said_in_chinese(en: str, zh: str, where: str) -> None:
    """The Chinese message of a failed check: Chinese words around the English one's numbers, and
    the Chinese of its hint."""
    if "\nHint: " not in en and not HAN.search(zh):
        return  # not an ExerciseError (e.g. the learner's code raised): nothing of the checks' to translate
    en_problem, _, en_hint = en.partition("\nHint: ")
    zh_problem, _, zh_hint = zh.partition("\n提示：")
    assert HAN.search(zh_problem) and "Hint:" not in zh, f"{where}: not said in Chinese: {zh!r}"
    numbers = re.compile(r"\d+")
    assert sorted(numbers.findall(zh_problem)) == sorted(numbers.findall(en_problem)), (
        f"{where}: the Chinese message has other numbers than the English one:\n{en_problem}\n{zh_problem}")
    if en_hint:
        with i18n.speaking("en"):
            forbidden = say("forbidden_hint")
        expected = say("forbidden_hint") if en_hint == forbidden else HINTS_ZH.get(en_hint)
        assert zh_hint == expected, f"{where}: the hint {en_hint!r} shown as {zh_hint!r}, not as {expected!r}"


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


# -- the checks in Chinese (issue 58 item 3) ------------------------------------------------

def test_checks_speak_chinese():
    """Every message of the checks in Chinese, numbers and reprs as in English, the hint translated."""
    hint = "every example exactly once"
    with i18n.speaking("zh"):
        with pytest.raises(ex.ExerciseError, match=r"^x：形状是 \(2, 3\)，应为 \(3, 2\)\n提示：每个样本恰好出现一次$"):
            ex.check_close(torch.zeros(2, 3), torch.zeros(3, 2), "x", hint=hint)
        with pytest.raises(ex.ExerciseError, match=r"^x：2 个值中有 1 个不对；第一个在下标 \(1,\)：得到 5，应为 2（最大差 3）$"):
            ex.check_close(torch.tensor([1.0, 5.0]), torch.tensor([1.0, 2.0]), "x")
        with pytest.raises(ex.ExerciseError, match=r"^p：是 0.5，应为 0.15\n提示：短的输入整个保留$"):
            ex.check_close(0.5, 0.15, "p", hint="a short input is kept whole")
        with pytest.raises(ex.ExerciseError, match=r"^结果：是 NaN$"):
            ex.check_close(float("nan"), 0.15)
        with pytest.raises(ex.ExerciseError, match=r"^结果：应是单个数，实际形状是 \(2,\)$"):
            ex.check_close(torch.zeros(2), 0.15)
        with pytest.raises(ex.ExerciseError, match=r"^结果：有 1 个位置是 NaN$"):
            ex.check_close(torch.tensor([float("nan"), 1.0]), torch.ones(2))
        with pytest.raises(ex.ExerciseError, match=r"^结果：形状是 \(2, 3\)，应为 \(2,\)（2 维，应为 1 维）$"):
            ex.check_shape(torch.zeros(2, 3), (2,))
        with pytest.raises(ex.ExerciseError, match=r"^结果：应是形状为 \(2,\) 的张量，实际是 int$"):
            ex.check_shape(3, (2,))
        with pytest.raises(ex.ExerciseError, match=r"^n：应是 list 或 tuple，实际是 int$"):
            ex.check_type(3, (list, tuple), "n")
        with pytest.raises(ex.ExerciseError, match=r"^answer：还没有定义：请先运行上面你的答案单元格$"):
            ex.check_defined({}, "answer")
        with pytest.raises(ex.ExerciseError, match=r"^ids：在下标 \(1,\) 不同：得到 2，应为 3$"):
            ex.check_equal(torch.tensor([1, 2]), torch.tensor([1, 3]), "ids")
        with pytest.raises(ex.ExerciseError, match=r"^n：是 'a'，应为 'b'$"):
            ex.check_equal("a", "b", "n")
        with pytest.raises(ex.ExerciseError, match=r"^f\(3\)：抛出了 ZeroDivisionError：division by zero$"):
            ex.check_function(lambda x: 1 / 0, lambda x: x, [(3,)], "f")
        with pytest.raises(ex.ExerciseError, match=r"^你的函数：应是函数，实际是 int$"):
            ex.check_function(3, lambda x: x, [(3,)], name="你的函数")
        with pytest.raises(ValueError, match=r"reference\('nope'\)：请写成 'package.module:name'"):
            ex.reference("nope")
        with pytest.raises(TypeError, match="需要一个 nn.Module"):
            ex.forbid_calls(3)
        layer = torch.nn.Linear(2, 2)
        with pytest.raises(ex.ExerciseError, match=r"^Linear：被你的答案调用了.*\n提示：用它的子模块和权重"):
            with ex.forbid_calls(layer):
                layer(torch.zeros(2))
        # a hint the catalogue lacks (a teacher's own exercise) is shown as it is
        with pytest.raises(ex.ExerciseError, match=r"\n提示：my own hint$"):
            ex.check_equal(1, 2, "n", hint="my own hint")


def test_check_equal_says_which_item_is_missing_or_extra_in_chinese():
    sep_pair = ["[CLS]", "the", "cat", "[SEP]", "it", "slept", "[SEP]"]
    hint = "segment B is the text of B and the [SEP] that closes it"
    with i18n.speaking("zh"):
        with pytest.raises(ex.ExerciseError, match=r"^tokens：有 6 项，应为 7 项：缺了位置 6 上的 '\[SEP\]'\n"
                                                   r"提示：片段 B 是 B 的文本加上结束它的 \[SEP\]$"):
            ex.check_equal(sep_pair[:-1], sep_pair, "tokens", hint=hint)
        with pytest.raises(ex.ExerciseError, match=r"有 9 项，应为 7 项：多了位置 1-2 上的 2 项（'\[PAD\]', '\[PAD\]'）"):
            ex.check_equal(sep_pair[:1] + ["[PAD]", "[PAD]"] + sep_pair[1:], sep_pair, "tokens")
        with pytest.raises(ex.ExerciseError, match=r"有 2 项，应为 4 项：缺了位置 2-3 上的 2 项（'c', 'd'）"):
            ex.check_equal(["a", "b"], ["a", "b", "c", "d"], "tokens")
        with pytest.raises(ex.ExerciseError, match=r"有 3 项，应为 4 项：第一处不同在位置 1：得到 'x'，应为 'b'"):
            ex.check_equal(["a", "x", "c"], ["a", "b", "c", "d"], "tokens")
        with pytest.raises(ex.ExerciseError, match=r"^ids：在位置 0 不同：得到 1，应为 0（3 个位置中有 2 个不同）$"):
            ex.check_equal([1, 1, 0], [0, 0, 0], "ids")


def test_the_environment_chooses_the_language(monkeypatch):
    """What `learn --lang zh` relies on: a kernel started with BERTEDU_LANG=zh speaks Chinese."""
    monkeypatch.setenv(i18n.ENVIRONMENT, "zh")
    with pytest.raises(ex.ExerciseError, match=r"^p：是 0.5，应为 0.15$"):
        ex.check_close(0.5, 0.15, "p")
    monkeypatch.setenv(i18n.ENVIRONMENT, "en")
    with pytest.raises(ex.ExerciseError, match=r"^p: is 0.5, expected 0.15$"):
        ex.check_close(0.5, 0.15, "p")


def _check_cells() -> list[tuple[str, int, str]]:
    """(notebook, cell index, source) of every exercise cell of the lessons and appendices, both editions."""
    folders = [NOTEBOOKS, NOTEBOOKS / "appendix", NOTEBOOKS / "zh", NOTEBOOKS / "zh" / "appendix"]
    found = []
    for path in (p for folder in folders for p in sorted(folder.glob("*.ipynb"))):
        for i, cell in enumerate(nbformat.read(path, as_version=4).cells):
            if cell.cell_type == "code" and ex.is_exercise_cell(cell):
                found.append((str(path.relative_to(NOTEBOOKS)), i, cell.source))
    return found


def test_every_hint_has_its_chinese():
    """A check cell's hint without a Chinese entry (or written so that it cannot be looked up) fails
    here; so does an entry no cell uses any more. A hint already in Chinese (a cell of the Chinese
    edition's own) needs no entry."""
    used, missing, unreadable = set(), [], []
    for where, i, source in _check_cells():
        try:
            hints = hints_in(source)
        except ValueError as error:
            unreadable.append(f"{where} cell {i}: {error}")
            continue
        for hint in hints:
            used.add(hint)
            if hint not in HINTS_ZH and not HAN.search(hint):
                missing.append(f"{where} cell {i}: {hint!r}")
    assert not unreadable, "\n".join(unreadable)
    assert not missing, "add these hints to bertedu/course/exercise_hints_zh.py:\n" + "\n".join(missing)
    assert not set(HINTS_ZH) - used, f"hints no check cell passes any more: {sorted(set(HINTS_ZH) - used)}"
    assert len(used) >= 90  # the lessons' hints were read (97 when the catalogue was written)
    untranslated = [en for en, zh in HINTS_ZH.items() if not HAN.search(zh) or zh == en]
    assert not untranslated, untranslated


def test_every_name_in_words_has_its_chinese():
    """What a check cell names in words (``"your precision"``, ``f"sequence {i} in packed"``) is
    shown in Chinese too; code names (``tokens``, ``lr_at(...)``) stay as they are."""
    used, missing = set(), []
    for where, i, source in _check_cells():
        for name in names_in(source):
            used.add(name)
            if in_words(name) and name not in NAMES_ZH and not HAN.search(name):
                missing.append(f"{where} cell {i}: {name!r}")
    assert not missing, "add these names to NAMES in bertedu/course/exercise_hints_zh.py:\n" + "\n".join(missing)
    assert not set(NAMES_ZH) - used, f"names no check cell gives any more: {sorted(set(NAMES_ZH) - used)}"
    assert len(used) >= 90 and len(NAMES_ZH) >= 30  # the cells were read (40 names in words when written)
    for en, zh in NAMES_ZH.items():
        assert HAN.search(zh) and zh.count("{}") == en.count("{}"), (en, zh)


def test_names_in_words_are_translated_with_their_values():
    with i18n.speaking("zh"):
        with pytest.raises(ex.ExerciseError, match=r"^scores \(4, 7\) 上的 softmax_backward：形状是"):
            ex.check_close(torch.zeros(2), torch.zeros(3), "softmax_backward on scores (4, 7)")
        with pytest.raises(ex.ExerciseError, match=r"^每行选中的词元数（exact，随机种子 3）：是 1，应为 2$"):
            ex.check_equal(1, 2, "tokens selected per row (exact, seed 3)")
        with pytest.raises(ex.ExerciseError, match=r"^你的 F1 值：是 0.5，应为 0.6$"):
            ex.check_close(0.5, 0.6, "your F1")
        with pytest.raises(ex.ExerciseError, match=r"^tokens：是 1，应为 2$"):
            ex.check_equal(1, 2, "tokens")
    with pytest.raises(ex.ExerciseError, match=r"^your F1: is 0.5, expected 0.6$"):
        ex.check_close(0.5, 0.6, "your F1")
    assert [in_words(n) for n in ("tokens", "lr_at({}, {})", "word_ids(['a', 'b c'])", "row 0 (no padding)",
                                  "select_exact ({}, seed {})", "byte_symbols() on {}")] == [
        False, False, False, True, True, True]


def test_hints_are_read_from_the_check_cells():
    source = ('check_close(a, b, "a", hint="one")\ncheck_equal(a, b, "b", "two")\n'
              'check_shape(x, (2,), hint="three" if n else "four")\ncheck_defined(globals(), "x", None)\n'
              'ex.check_function(f, g, [(1,)], "f", "five")\nprint("no hint", 3)')
    assert sorted(hints_in(source)) == ["five", "four", "one", "three", "two"]
    with pytest.raises(ValueError, match=r"hint=f\"k=\{k\}\": write a hint as a string literal"):
        hints_in('check_close(a, b, hint=f"k={k}")')
    assert sorted(names_in(source)) == ["a", "b", "f", "x"]
    assert names_in('check_close(a, b, name=f"row {i} of {n!r}")\ncheck_equal(a, b, label)') == ["row {} of {}"]


def test_each_message_has_its_chinese_with_the_same_values():
    import string

    from bertedu.course.exercise_messages import MESSAGES

    def fields(template):
        return sorted(f for _, f, _, _ in string.Formatter().parse(template) if f)

    assert set(MESSAGES["zh"]) == set(MESSAGES["en"])
    for key, en in MESSAGES["en"].items():
        assert fields(MESSAGES["zh"][key]) == fields(en), key
        assert key in ("message", "or", "raised") or HAN.search(MESSAGES["zh"][key]), key
