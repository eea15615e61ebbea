"""Loaded by every pytest run from the repository root, unit tests and notebooks alike."""

import atexit
import os
import shutil
import tempfile
from pathlib import Path

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
