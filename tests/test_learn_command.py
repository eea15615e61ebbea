"""`python -m bertedu.course.exercises learn`, the README's one command for a learner (issue 60
case 4): it works from any folder, says what to do as root instead of ending in silence, and
notebook 00 names the same command as the README."""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import bertedu.course.exercises as ex

ROOT = Path(__file__).resolve().parent.parent


def test_learn_works_from_any_folder(tmp_path):
    """--src was `notebooks`, relative to where the learner stood: elsewhere it crashed."""
    elsewhere = tmp_path / "somewhere"
    elsewhere.mkdir()
    out = tmp_path / "mine"
    proc = subprocess.run([sys.executable, "-m", "bertedu.course.exercises", "learn", "--no-open", "--out", str(out)],
                          cwd=elsewhere, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    course = sorted(p.name for p in (ROOT / "notebooks").glob("*.ipynb"))
    appendix = list((ROOT / "notebooks" / "appendix").glob("*.ipynb"))
    assert sorted(p.name for p in out.glob("*.ipynb")) == course
    assert f"{len(course) + len(appendix)} new copies" in proc.stdout
    assert ex.BEGIN not in (out / course[-1]).read_text(encoding="utf-8")
    assert ex.REPOSITORY == ROOT


def test_learn_without_the_notebooks_is_one_line(tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit) as stop:
        ex.main(["learn", "--src", str(tmp_path / "empty"), "--out", str(tmp_path / "out"), "--no-open"])
    assert stop.value.code == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no course notebooks in" in err and "--src FOLDER" in err


def test_learn_as_root_says_how_to_start_jupyterlab(tmp_path, capsys, monkeypatch):
    """JupyterLab refuses to run as root; `learn` ended with status 0 and nothing said."""
    started = []
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: started.append(command))
    with pytest.raises(SystemExit) as stop:
        ex.main(["learn", "--out", str(tmp_path / "out")])
    assert stop.value.code == 2 and not started
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "running as root" in err and "--allow-root" in err
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: started.append(command) or
                        subprocess.CompletedProcess(command, 0))
    assert ex.main(["learn", "--out", str(tmp_path / "out"), "--allow-root"]) == 0
    assert started[-1][-2:] == ["--allow-root", str(tmp_path / "out")]


def test_notebook_00_and_the_readme_give_the_same_command():
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert "python -m bertedu.course.exercises learn" in readme
    cells = json.loads((ROOT / "notebooks" / "00_course_map.ipynb").read_text(encoding="utf-8"))["cells"]
    markdown = "".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
    assert "python -m bertedu.course.exercises learn" in markdown
    assert "exercises strip" not in markdown
