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


# -- the Chinese edition: learn --lang zh (issue 58 item 3) --------------------------------

def _zh_like_course(folder: Path) -> Path:
    """A folder shaped like notebooks/zh/: a lesson whose markdown is Chinese (code cells, exercises
    included, the English lesson's), and an appendix."""
    import nbformat

    nb = nbformat.read(ROOT / "notebooks" / "01_tokenization.ipynb", as_version=4)
    for cell in nb.cells:
        if cell.cell_type == "markdown":
            cell.source = "## 练习\n\n中文说明。"
    (folder / "appendix").mkdir(parents=True)
    nbformat.write(nb, folder / "01_tokenization.ipynb")
    nbformat.write(nb, folder / "appendix" / "01_vocabulary_training.ipynb")
    return folder


def test_learn_in_chinese_copies_the_chinese_edition_without_solutions(tmp_path, capsys):
    src, out = _zh_like_course(tmp_path / "zh"), tmp_path / "learner" / "zh"
    assert ex.main(["learn", "--lang", "zh", "--src", str(src), "--out", str(out), "--no-open"]) == 0
    assert "2 new copies" in capsys.readouterr().out
    for copy in (out / "01_tokenization.ipynb", out / "appendix" / "01_vocabulary_training.ipynb"):
        text = copy.read_text(encoding="utf-8")
        assert "中文说明" in text and ex.BEGIN not in text and "raise NotImplementedError()" in text
        assert "wrong_answer" not in text  # the tests' wrong answers are not handed out


def test_learn_in_chinese_reads_notebooks_zh_and_writes_learner_zh(tmp_path, capsys, monkeypatch):
    src = _zh_like_course(tmp_path / "notebooks" / "zh")
    monkeypatch.setitem(ex.EDITIONS, "zh", (src, tmp_path / "learner" / "zh"))
    assert ex.main(["learn", "--lang", "zh", "--no-open"]) == 0
    assert (tmp_path / "learner" / "zh" / "01_tokenization.ipynb").is_file()
    assert ex.EDITIONS["en"] == (ROOT / "notebooks", ROOT / "learner")  # English: as before


def test_learn_in_chinese_without_the_chinese_lessons_is_one_line(tmp_path, capsys, monkeypatch):
    (tmp_path / "zh").mkdir()
    monkeypatch.setitem(ex.EDITIONS, "zh", (tmp_path / "zh", tmp_path / "out"))
    with pytest.raises(SystemExit) as stop:
        ex.main(["learn", "--lang", "zh", "--no-open"])
    assert stop.value.code == 2 and not (tmp_path / "out").exists()
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and f"no course notebooks in {tmp_path / 'zh'}" in err
    assert "Chinese edition" in err and "--lang en" in err


def test_jupyterlab_gets_the_language_for_its_kernels(tmp_path, monkeypatch):
    """learn --lang zh starts JupyterLab with BERTEDU_LANG=zh, which every kernel it starts inherits;
    a Python started with that environment speaks Chinese."""
    command, env = ex.jupyterlab(tmp_path, "zh")
    assert command == [sys.executable, "-m", "jupyterlab", str(tmp_path)] and env["BERTEDU_LANG"] == "zh"
    assert env["PATH"] == os.environ["PATH"]  # the rest of the environment is the learner's
    assert ex.jupyterlab(tmp_path, "en")[1]["BERTEDU_LANG"] == "en"
    with pytest.raises(ValueError, match="the course speaks en or zh"):
        ex.jupyterlab(tmp_path, "fr")
    check = "from bertedu.course.exercises import check_close; check_close(0.5, 0.15, 'p')"
    proc = subprocess.run([sys.executable, "-c", check], env=env, cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "p：是 0.5，应为 0.15" in proc.stderr

    started = []
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    monkeypatch.setattr(subprocess, "run", lambda command, **kw: started.append((command, kw["env"])) or
                        subprocess.CompletedProcess(command, 0))
    src = _zh_like_course(tmp_path / "zh")
    assert ex.main(["learn", "--lang", "zh", "--src", str(src), "--out", str(tmp_path / "out")]) == 0
    assert started[-1][0][-1] == str(tmp_path / "out") and started[-1][1]["BERTEDU_LANG"] == "zh"
    assert ex.main(["learn", "--src", str(src), "--out", str(tmp_path / "out")]) == 0  # --lang en, the default
    assert started[-1][1]["BERTEDU_LANG"] == "en"


def test_learn_as_root_names_the_language_it_starts_with(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    with pytest.raises(SystemExit):
        ex.main(["learn", "--lang", "zh", "--src", str(_zh_like_course(tmp_path / "zh")), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert "it starts: BERTEDU_LANG=zh " in err and "--allow-root" in err
