"""The root conftest.py's pytest-xdist scheduler keeps every notebook in one unit of work (one worker runs
them one after another, the other the test files). It overrides `_split_scope`, a private method of
xdist's LoadFileScheduling: if a later xdist renames it, this test fails, rather than the notebooks
quietly spreading over both workers and competing for the two cores."""

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


class Options:
    """A stand-in for pytest's config: the two options the scheduler reads."""

    def __init__(self, dist: str):
        self.values = {"dist": dist, "tx": ["2*popen"]}

    def getvalue(self, name):
        return self.values[name]


def root_conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_notebooks_are_one_unit_of_work_and_test_files_one_each():
    from xdist.scheduler import LoadFileScheduling

    assert "_split_scope" in vars(LoadFileScheduling)  # the method the scheduler overrides is still xdist's
    scheduler = root_conftest().pytest_xdist_make_scheduler(Options("loadfile"), None)
    assert isinstance(scheduler, LoadFileScheduling) and scheduler.numnodes == 2
    expected = {
        "notebooks/00_course_map.ipynb::Cell 0": "notebooks",
        "notebooks/17_bert_vs_gpt.ipynb::Cell 6": "notebooks",
        "tests/test_qa.py::test_windows": "tests/test_qa.py",
        "tests/test_qa.py::test_decode[1]": "tests/test_qa.py",
        "tests/test_cli.py::test_help": "tests/test_cli.py",
    }
    assert {nodeid: scheduler._split_scope(nodeid) for nodeid in expected} == expected


def test_other_distribution_modes_keep_xdist_s_own_scheduler():
    assert root_conftest().pytest_xdist_make_scheduler(Options("load"), None) is None
