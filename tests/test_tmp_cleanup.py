"""tests/conftest.py removes a passing test's tmp_path as soon as the test ends and keeps a failing one's.

A full run once filled the CI machine's disk: pytest keeps every tmp_path until the session ends,
and some tests write checkpoints of hundreds of MB.
"""

import re
from pathlib import Path

import nbformat

pytest_plugins = ["pytester"]

CONFTEST = Path(__file__).with_name("conftest.py")


def test_a_passing_tests_tmp_path_is_removed_and_a_failing_ones_is_kept(pytester):
    pytester.makeconftest(CONFTEST.read_text(encoding="utf-8"))
    record = pytester.path / "paths.txt"
    pytester.makepyfile(f"""
        RECORD = {str(record)!r}

        def _remember(name, path):
            (path / "big.bin").write_bytes(b"0" * 1000)
            with open(RECORD, "a") as f:
                f.write(f"{{name}} {{path}}\\n")

        def test_passes(tmp_path):
            _remember("passes", tmp_path)

        def test_fails(tmp_path):
            _remember("fails", tmp_path)
            assert False

        def test_no_tmp_path():
            pass
    """)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(passed=2, failed=1)
    paths = dict(line.split(" ", 1) for line in record.read_text().splitlines())
    assert not Path(paths["passes"]).exists()
    assert (Path(paths["fails"]) / "big.bin").exists()


def test_every_notebook_removes_the_temporary_folders_it_makes():
    """nbval kills a notebook's kernel at the end (no finaliser runs), so a TemporaryDirectory
    held in a variable is only removed by an explicit `.cleanup()`; without one, every run of
    notebook 10 left 1.2 GB behind in /tmp."""
    folder = CONFTEST.parent.parent / "notebooks"
    notebooks = sorted([*folder.glob("*.ipynb"), *folder.glob("appendix/*.ipynb")])
    assert len(notebooks) > 10
    for path in notebooks:
        code = "\n".join(c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "code")
        for name in re.findall(r"^\s*(\w+) = tempfile\.TemporaryDirectory\(", code, flags=re.M):
            assert f"{name}.cleanup()" in code, f"{path.name}: {name} is never cleaned up"
