"""Exercises: checks that say what is wrong, and the learner's copy of every notebook.

Every notebook ends with a few exercises written as nbgrader cells (nbgrader is the
Jupyter project's tool for assignments; its cell metadata and solution markers are used
as they are, so a teacher can also run the full `nbgrader generate_assignment` /
`autograde` pipeline on these notebooks):

- a *solution* cell (``metadata.nbgrader.solution = true``) holds the answer between
  ``### BEGIN SOLUTION`` and ``### END SOLUTION``;
- the *check* cells after it (``metadata.nbgrader.grade = true``, locked) call the
  ``check_*`` functions below, which raise an ``ExerciseError`` (an ``AssertionError``)
  naming what is wrong: the shape, the first differing value, and a hint;
- *read-only* cells (``locked = true``) set up what the exercises need, so that the
  exercises run on their own after a kernel restart.

The stored notebooks keep the solutions (they run under ``pytest --nbval``). The learner's
version is made by one command, which uses nbgrader's own ``ClearSolutions`` preprocessor:

    python -m bertedu.course.exercises strip notebooks/ learner/

A learner makes their own copies once and opens them with ``python -m bertedu.course.exercises
learn`` (copies into learner/, which git ignores; a copy that exists holds the learner's work and
is never overwritten). The Chinese edition's copies:

    python -m bertedu.course.exercises learn --lang zh     # notebooks/zh/ -> learner/zh/, checks in Chinese

The checks speak the learner's language (``bertedu.course.i18n``: ``use("zh")``, or
``BERTEDU_LANG=zh``, which ``learn --lang zh`` gives JupyterLab and so every kernel it starts).
A Chinese lesson's check cells are the English ones byte for byte; their messages and English
hints are translated at run time (``bertedu.course.exercise_messages``, whose catalogue of hints
tests/test_exercises.py keeps complete).

Each solution cell also stores a deliberately wrong answer in
``metadata.bertedu.wrong_answer`` and a fragment of the message its check must print
(``metadata.bertedu.expect``); tests/test_exercises.py runs every check against the
solution (it passes) and against the wrong answer (it fails with that message).
Introduced in notebook 00 (how to do an exercise).
"""

from __future__ import annotations

import argparse
import copy
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

from bertedu.course import i18n
from bertedu.course.exercise_messages import hint as _hint_in_language
from bertedu.course.exercise_messages import name as _name_in_language
from bertedu.course.exercise_messages import say

BEGIN, END = "### BEGIN SOLUTION", "### END SOLUTION"


class ExerciseError(AssertionError):
    """A check failed; the message says what is wrong and how to look for the mistake."""


def _fail(name: str, problem: str, hint: str | None) -> None:
    message = say("message", name=_name_in_language(name), problem=problem)
    if hint:
        message += say("hint", hint=_hint_in_language(hint))
    raise ExerciseError(message)


def _shape(value: Any) -> tuple | None:
    shape = getattr(value, "shape", None)
    return tuple(shape) if shape is not None else None


def _as_tensor(value: Any):
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().to("cpu")
    return torch.as_tensor(value)


def check_defined(namespace: dict, name: str, hint: str | None = None) -> Any:
    """The exercise's answer exists (the learner ran their cell); returns it."""
    if name not in namespace:
        _fail(name, say("not_defined"), hint)
    return namespace[name]


def check_type(value: Any, expected: type | tuple[type, ...], name: str | None = None, hint: str | None = None) -> None:
    if not isinstance(value, expected):
        names = expected.__name__ if isinstance(expected, type) else say("or").join(t.__name__ for t in expected)
        _fail(name or say("result"), say("should_be_type", expected=names, got=type(value).__name__), hint)


def check_shape(value: Any, expected: Sequence[int], name: str | None = None, hint: str | None = None) -> None:
    """``value.shape`` equals ``expected`` (a tuple of ints)."""
    name = name or say("result")
    shape = _shape(value)
    if shape is None:
        _fail(name, say("should_be_tensor", shape=tuple(expected), got=type(value).__name__), hint)
    if shape != tuple(expected):
        problem = say("shape_differs", shape=shape, expected=tuple(expected))
        if len(shape) != len(expected):
            problem += say("dimensions_differ", got=len(shape), expected=len(expected))
        _fail(name, problem, hint)


def check_close(
    actual: Any,
    expected: Any,
    name: str | None = None,
    hint: str | None = None,
    atol: float = 1e-5,
    rtol: float = 1e-4,
) -> None:
    """Numbers or tensors agree within tolerance; otherwise say where and by how much."""
    import torch

    name = name or say("result")
    if isinstance(expected, (int, float)) and not isinstance(expected, bool):
        if not isinstance(actual, (int, float)) and _shape(actual) not in ((), None):
            _fail(name, say("single_number", shape=_shape(actual)), hint)
        try:
            got = float(actual)
        except (TypeError, ValueError):
            _fail(name, say("a_number", got=type(actual).__name__), hint)
        if math.isnan(got):
            _fail(name, say("is_nan"), hint)
        if abs(got - expected) > atol + rtol * abs(expected):
            _fail(name, say("number_differs", got=got, expected=expected), hint)
        return
    exp = _as_tensor(expected)
    if not isinstance(actual, torch.Tensor) and _shape(actual) is None and not isinstance(actual, (list, tuple)):
        _fail(name, say("should_be_tensor", shape=tuple(exp.shape), got=type(actual).__name__), hint)
    got = _as_tensor(actual)
    check_shape(got, tuple(exp.shape), name, hint)
    got, exp = got.double(), exp.double()
    if torch.isnan(got).any() and not torch.isnan(exp).any():
        _fail(name, say("nan_positions", count=int(torch.isnan(got).sum())), hint)
    diff = (got - exp).abs()
    bad = diff > atol + rtol * exp.abs()
    if bad.any():
        where = tuple(int(i) for i in bad.nonzero()[0]) if diff.dim() else ()
        problem = say("values_differ", bad=int(bad.sum()), total=bad.numel(), where=where, got=got[where].item(),
                      expected=exp[where].item(), largest=diff.max().item())
        _fail(name, problem, hint)


def check_equal(actual: Any, expected: Any, name: str | None = None, hint: str | None = None) -> None:
    """Exact equality; for sequences, name the first position that differs and what is there.

    When the lengths differ, say which items are missing or extra if that explains the
    difference (``has 12 items, expected 13: the item '[SEP]' at position 12 is missing``).
    """
    name = name or say("result")
    if isinstance(expected, (list, tuple)) and isinstance(actual, (list, tuple)):
        first = next((i for i, (a, e) in enumerate(zip(actual, expected)) if a != e), None)
        if len(actual) != len(expected):
            detail = _length_difference(list(actual), list(expected), first)
            _fail(name, say("length_differs", got=len(actual), expected=len(expected), detail=detail), hint)
        if first is not None:
            n_differ = sum(a != e for a, e in zip(actual, expected))
            more = say("positions_differ", count=n_differ, total=len(expected)) if n_differ > 1 else ""
            _fail(name, say("position_differs", first=first, got=actual[first], expected=expected[first], more=more),
                  hint)
        return
    if _shape(expected) is not None:
        check_shape(actual, _shape(expected), name, hint)
        import torch

        got, exp = _as_tensor(actual), _as_tensor(expected)
        if not torch.equal(got, exp):
            where = tuple(int(i) for i in (got != exp).nonzero()[0])
            _fail(name, say("index_differs", where=where, got=got[where].item(), expected=exp[where].item()), hint)
        return
    if actual != expected:
        _fail(name, say("value_differs", got=actual, expected=expected), hint)


def _items(values: list, start: int) -> str:
    """``the item 'a' at position 4`` or ``the 3 items at positions 4-6 ('a', 'b', 'c')``."""
    if len(values) == 1:
        return say("item", value=values[0], start=start)
    shown = ", ".join(repr(v) for v in values[:5]) + (", ..." if len(values) > 5 else "")
    return say("items", count=len(values), start=start, end=start + len(values) - 1, shown=shown)


def _length_difference(actual: list, expected: list, first: int | None) -> str:
    """Where two sequences of different lengths part: the items missing or extra there, if that
    is the whole difference, otherwise the first position that differs."""
    i = min(len(actual), len(expected)) if first is None else first
    k = abs(len(actual) - len(expected))
    if len(actual) < len(expected) and actual[i:] == expected[i + k:]:
        return say("one_missing" if k == 1 else "many_missing", items=_items(expected[i:i + k], i))
    if len(actual) > len(expected) and actual[i + k:] == expected[i:]:
        return say("extra", items=_items(actual[i:i + k], i))
    # (here i < both lengths: a prefix of the other sequence is always explained above)
    return say("first_difference", position=i, got=actual[i], expected=expected[i])


def check_function(
    fn: Callable,
    reference: Callable,
    cases: Iterable[tuple],
    name: str | None = None,
    hint: str | None = None,
    compare: Callable = check_close,
) -> None:
    """Call ``fn`` and ``reference`` on each case (a tuple of arguments) and compare."""
    name = name or getattr(fn, "__name__", None) or say("your_function")
    if not callable(fn):
        _fail(name, say("not_a_function", got=type(fn).__name__), hint)
    for args in cases:
        shown = ", ".join(_describe(a) for a in args)
        try:
            got = fn(*args)
        except NotImplementedError:
            raise
        except Exception as error:  # the learner's code raised: say on which input
            _fail(f"{name}({shown})", say("raised", error=type(error).__name__, text=error), hint)
        compare(got, reference(*args), f"{name}({shown})", hint)


def _describe(arg: Any) -> str:
    shape = _shape(arg)
    if shape is not None:
        return f"<tensor {tuple(shape)}>"
    text = repr(arg)
    return text if len(text) <= 40 else text[:37] + "..."


# -- keeping the answer out of the learner's reach (bertedu.course.exercise_rules) ---------

def reference(path: str) -> Any:
    """The library's own version of an exercise, fetched inside a check cell without binding a
    name in the learner's namespace: ``reference("bertedu.model.tasks:mean_pool")(h, mask)``.

    A set-up cell that imports the function the learner is asked to write lets the answer be
    ``return mean_pool(h, mask)``; a check that calls ``reference(...)`` leaves nothing to call.
    """
    import importlib

    module, sep, name = path.partition(":")
    if not sep or not name:
        raise ValueError(say("reference_path", path=path))
    value = importlib.import_module(module)
    for part in name.split("."):
        value = getattr(value, part)
    return value


def put_away(namespace: dict, *names: str) -> None:
    """Take names that answer an exercise out of the learner's namespace, in the set-up cell:
    ``put_away(globals(), "normalize_answer")`` after a lesson that imported ``normalize_answer``,
    before an exercise that asks you to write it. A name that is not there (a kernel restarted at
    the set-up cell) is fine; run the lesson's first cell again to have it back."""
    for name in names:
        namespace.pop(name, None)


class forbid_calls:  # noqa: N801 (used as a context manager, read like `with torch.no_grad():`)
    """Within the ``with`` block, calling ``obj`` (an ``nn.Module``'s forward, or any callable
    object) or one of its named ``methods`` raises an ExerciseError that says so.

    For an exercise whose function receives the very object that computes the answer
    (``embed(emb, ids)`` checked against ``emb(ids)``): run the learner's function inside the
    block, compare outside it::

        with forbid_calls(emb):
            yours = embed(emb, input_ids, token_type_ids)
        check_close(yours, emb(input_ids, token_type_ids), "embed(...)")

    Sub-modules stay callable (``emb.layer_norm(x)`` is how the exercise is meant to be done).
    """

    def __init__(self, obj: Any, *methods: str, name: str | None = None):
        if not methods and not hasattr(obj, "forward"):
            raise TypeError(say("forbid_needs"))
        self.obj, self.name = obj, name or type(obj).__name__
        self.methods = list(methods) or ["forward"]
        self.saved: dict[str, Any] = {}

    def _refuse(self, method: str) -> Callable:
        def refuse(*args, **kwargs):
            shown = self.name if method == "forward" else f"{self.name}.{method}"
            _fail(shown, say("forbidden_call"), say("forbidden_hint"))
        return refuse

    def __enter__(self) -> "forbid_calls":
        for method in self.methods:
            self.saved[method] = self.obj.__dict__.get(method, _MISSING)
            setattr(self.obj, method, self._refuse(method))
        return self

    def __exit__(self, *exc) -> None:
        for method, before in self.saved.items():
            if before is _MISSING:
                delattr(self.obj, method)
            else:
                setattr(self.obj, method, before)


_MISSING = object()


# -- reading exercises out of a notebook (used by the tests and by `strip`) ---------------

def _nbgrader(cell) -> dict:
    return cell.get("metadata", {}).get("nbgrader", {})


def is_solution(cell) -> bool:
    return bool(_nbgrader(cell).get("solution"))


def is_check(cell) -> bool:
    return bool(_nbgrader(cell).get("grade")) and not is_solution(cell)


def is_exercise_cell(cell) -> bool:
    return bool(_nbgrader(cell))


@dataclass
class Exercise:
    """One solution cell and the check cells that follow it, by cell index."""

    solution: int
    checks: list[int] = field(default_factory=list)
    wrong_answer: str | None = None
    expect: str | None = None


def exercises(nb) -> list[Exercise]:
    """The coding exercises of a notebook, in order."""
    found: list[Exercise] = []
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] != "code":
            continue
        if is_solution(cell):
            meta = cell["metadata"].get("bertedu", {})
            found.append(Exercise(i, [], meta.get("wrong_answer"), meta.get("expect")))
        elif is_check(cell) and found:
            found[-1].checks.append(i)
    return found


def with_wrong_answer(source: str, wrong: str) -> str:
    """The solution cell with its solution region replaced by ``wrong`` (what a learner edits)."""
    lines = source.split("\n")
    begin = next((i for i, line in enumerate(lines) if BEGIN in line), None)
    end = next((i for i, line in enumerate(lines) if END in line), None)
    if begin is None or end is None:
        return wrong
    indent = lines[begin][: len(lines[begin]) - len(lines[begin].lstrip())]
    body = [indent + line if line else line for line in wrong.split("\n")]
    return "\n".join(lines[:begin] + body + lines[end + 1:])


def learner_version(nb):
    """A copy of ``nb`` with solutions replaced by nbgrader's stub and exercise outputs cleared."""
    from nbgrader.preprocessors import ClearSolutions

    nb = copy.deepcopy(nb)
    nb, _ = ClearSolutions().preprocess(nb, {})
    for cell in nb.cells:
        cell.metadata.pop("bertedu", None)  # the wrong answers are for the tests
        if is_exercise_cell(cell) and cell.cell_type == "code":
            cell.outputs, cell.execution_count = [], None
    return nb


def strip(src: str | Path, out: str | Path) -> list[Path]:
    """Write the learner's version of every notebook in ``src`` (a folder or one file) to ``out``."""
    import nbformat

    src, out = Path(src), Path(out)
    paths = sorted(src.glob("*.ipynb")) if src.is_dir() else [src]
    if not paths:
        raise FileNotFoundError(f"no .ipynb files in {src}")
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for path in paths:
        nb = nbformat.read(path, as_version=4)
        target = out / path.name
        nbformat.write(learner_version(nb), target)
        written.append(target)
    return written


def learner_copies(src: str | Path, out: str | Path) -> tuple[list[Path], list[Path]]:
    """The learner's copies of the notebooks in ``src`` (and of its appendix/) in ``out``, made
    once: a copy that exists already holds the learner's work and is kept, never overwritten.
    Returns (written, kept)."""
    import nbformat

    src, out = Path(src), Path(out)
    written, kept = [], []
    for folder in (src, src / "appendix"):
        if not folder.is_dir():
            continue
        target_folder = out / folder.relative_to(src)
        target_folder.mkdir(parents=True, exist_ok=True)
        for path in sorted(folder.glob("*.ipynb")):
            target = target_folder / path.name
            if target.exists():
                kept.append(target)
                continue
            nbformat.write(learner_version(nbformat.read(path, as_version=4)), target)
            written.append(target)
    if not written and not kept:
        raise FileNotFoundError(f"no .ipynb files in {src}")
    return written, kept


# The course's notebooks beside the package (bertedu/course/exercises.py -> the repository root).
REPOSITORY = Path(__file__).resolve().parents[2]
# Where each edition's lessons are, and where `learn` writes the learner's copies of them.
EDITIONS = {"en": (REPOSITORY / "notebooks", REPOSITORY / "learner"),
            "zh": (REPOSITORY / "notebooks" / "zh", REPOSITORY / "learner" / "zh")}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.exercises", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("strip", help="write the learner's notebooks (solutions removed)")
    p.add_argument("src", help="a notebook or a folder of notebooks (e.g. notebooks/ or notebooks/zh/)")
    p.add_argument("out", help="the folder to write the learner's notebooks to")
    p = sub.add_parser("learn", help="make your own copies of the course (once; your work is kept) and open them")
    p.add_argument("--lang", choices=i18n.LANGUAGES, default="en",
                   help="the edition: en (notebooks/ -> learner/) or zh, the Chinese one (notebooks/zh/ -> "
                        "learner/zh/); JupyterLab's kernels get BERTEDU_LANG, so the checks speak it (default: en)")
    p.add_argument("--src", help="the course's notebooks (default: the edition's folder in the repository bertedu "
                                 "is in: notebooks/, or notebooks/zh/ with --lang zh)")
    p.add_argument("--out", help="your copies (default: learner/ beside notebooks/, which git ignores; learner/zh/ "
                                 "with --lang zh)")
    p.add_argument("--no-open", action="store_true", help="make the copies, do not start JupyterLab")
    p.add_argument("--allow-root", action="store_true", help="start JupyterLab as root (it refuses otherwise)")
    args = parser.parse_args(argv)
    if args.command == "strip":
        written = strip(args.src, args.out)
        print(f"wrote {len(written)} learner notebooks to {args.out}")
        return 0
    src, out = EDITIONS[args.lang]
    args.src, args.out = args.src or str(src), args.out or str(out)
    return _learn(parser, args)


def jupyterlab(out: str | Path, lang: str = "en", allow_root: bool = False) -> tuple[list[str], dict[str, str]]:
    """The command that opens the learner's copies in ``out``, and its environment: this process's,
    with ``BERTEDU_LANG=lang``, which JupyterLab hands to every kernel it starts (bertedu.course.i18n)."""
    import os
    import sys

    if lang not in i18n.LANGUAGES:
        raise ValueError(f"lang={lang!r}: the course speaks {' or '.join(i18n.LANGUAGES)}")
    command = [sys.executable, "-m", "jupyterlab", *(["--allow-root"] if allow_root else []), str(out)]
    return command, {**os.environ, i18n.ENVIRONMENT: lang}


def _learn(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    """`learn`: the copies, then JupyterLab on them; a problem is one line (status 2)."""
    import os
    import subprocess
    import sys

    if not any(Path(args.src).glob("*.ipynb")):
        fix = ("(the Chinese edition is not in this copy of the course): update it (git pull), use --lang en"
               if args.lang == "zh" else
               "(bertedu installed without its repository?): install from a clone (pip install -e .)")
        parser.exit(2, f"{parser.prog} learn: error: no course notebooks in {args.src} {fix}, or pass --src FOLDER\n")
    written, kept = learner_copies(args.src, args.out)
    print(f"{args.out}: {len(written)} new copies without solutions, {len(kept)} of yours kept as they are")
    if args.no_open:
        return 0
    command, env = jupyterlab(args.out, args.lang, args.allow_root)
    if hasattr(os, "geteuid") and os.geteuid() == 0 and not args.allow_root:
        parser.exit(2, f"{parser.prog} learn: error: running as root, and JupyterLab refuses to start as root: run "
                       f"this as another user, or add --allow-root (it starts: {i18n.ENVIRONMENT}={args.lang} "
                       f"{' '.join(command)} --allow-root)\n")
    status = subprocess.run(command, check=False, env=env).returncode
    if status:
        print(f"{parser.prog} learn: JupyterLab exited with status {status}; your copies are in {args.out}",
              file=sys.stderr)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
