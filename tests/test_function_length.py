"""Every function of the project fits on one screen: at most 60 lines from `def` to its last line,
docstring included (the brief's rule, so a reader sees a function whole)."""

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
MAX_LINES = 60
SOURCES = sorted([*(ROOT / "bertedu").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py"),
                  *(ROOT / "tests").rglob("*.py"), ROOT / "conftest.py"])


def long_functions(source: str, max_lines: int = MAX_LINES) -> list[tuple[str, int, int]]:
    """(name, first line, length) of each function (nested ones too) longer than max_lines."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            length = node.end_lineno - first + 1
            if length > max_lines:
                found.append((node.name, first, length))
    return found


def test_the_reader_counts_a_function_from_its_decorator_to_its_last_line():
    body = "\n".join(f"    x{i} = {i}" for i in range(59))
    assert long_functions(f"def f():\n{body}\n") == []  # 60 lines: fits
    assert long_functions(f"@staticmethod\ndef f():\n{body}\n") == [("f", 1, 61)]
    nested = f"class A:\n    def g(self):\n        def h():\n{body.replace('    ', '            ')}\n            pass\n"
    assert [name for name, _, _ in long_functions(nested)] == ["g", "h"]


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_function_fits_on_one_screen(path):
    too_long = long_functions(path.read_text(encoding="utf-8"))
    assert not too_long, "split these functions (at most 60 lines each): " + ", ".join(
        f"{path.relative_to(ROOT)}:{line} {name} ({n} lines)" for name, line, n in too_long)
