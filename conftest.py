"""Loaded by every pytest run from the repository root, unit tests and notebooks alike."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

# Figures written while testing (by tests and by the notebooks nbval runs: their kernels
# inherit this environment) go to a throwaway folder, so `pytest` leaves the tracked
# figures/ untouched. Regenerating them re-plots floats whose last bits differ from machine
# to machine, which moves antialiased line edges by a fraction of a pixel: new bytes, same
# picture. The folder is named figures/ because notebook 02 prints the folder's name.
# Set BERTEDU_FIGURES_DIR="$PWD/figures" yourself to refresh the tracked ones.
if "BERTEDU_FIGURES_DIR" not in os.environ:
    _figures_tmp = tempfile.mkdtemp(prefix="bertedu-tests-")
    atexit.register(shutil.rmtree, _figures_tmp, ignore_errors=True)
    os.environ["BERTEDU_FIGURES_DIR"] = str(Path(_figures_tmp) / "figures")

# OpenMP threads that wait for work sleep instead of spinning. Alone on the machine this changes
# little (notebook 06: 24.0 s spinning, 24.5 s sleeping); beside another busy process
# (a second pytest worker, a helper, a CI neighbour) spinning threads steal its cores: 06 took 404 s
# next to a 2-thread matrix loop, 35.6 s with sleeping threads (benchmarks/RESULTS.md). Read when
# torch loads, so here, before any test imports it; the notebooks' kernels inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# The Chinese edition (notebooks/zh/) is not executed by nbval: its code cells are the English lessons'
# cells, checked by equality, and its own cells run in tests/test_editions.py (bertedu.course.editions).
collect_ignore_glob = ["notebooks/zh/*"]


@pytest.hookimpl(optionalhook=True)  # a pytest-xdist hook: `pytest -n 2` (pyproject.toml's addopts)
def pytest_xdist_make_scheduler(config, log):
    """`--dist loadfile`, except that all the notebooks are one unit of work: they run one after
    another on one worker (each with its 2 threads), while the other runs the test files."""
    if config.getvalue("dist") != "loadfile":
        return None
    from xdist.scheduler import LoadFileScheduling

    class NotebooksTogether(LoadFileScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return "notebooks" if ".ipynb::" in nodeid else super()._split_scope(nodeid)

    return NotebooksTogether(config, log)
