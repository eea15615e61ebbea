"""The Chinese edition (notebooks/zh/) kept in step with the English lessons (issue 58, item 6).

- Every English lesson has its Chinese edition, and its code cells with their outputs are the English
  ones byte for byte, outside the cells the edition marks as its own (equality, not re-execution:
  the Chinese lessons add nothing to nbval's time).
- The own cells run, alone, in a fresh kernel and print what they stored (slow: one kernel).
- The English rules hold for the Chinese prose: every decimal number printed by the notebook or
  cited (tests/test_claims.py's rule, with Chinese sentences and citations), the lesson limits
  (bertedu.course.lessons, a Chinese character counting one word), the exercise rules, the map first
  and labelled in Chinese, every relative link resolves, and the glossary terms the English lesson
  links are linked in the Chinese one too, under the glossary's Chinese term.
- `editions.sync` carries a change of the English code over, and `differences` sees what is stale.
"""
import copy
import json
import re
from pathlib import Path

import nbformat
import pytest

from bertedu.course import edition_cells, editions
from bertedu.course import exercise_rules
from bertedu.course.lessons import lesson_report, problems
from test_claims import DECIMAL, REFERENCE_BEFORE, SOURCE, VERSION_BEFORE, blocks, checked_text, notebook_outputs, printed

REPO = Path(__file__).resolve().parents[1]
ENGLISH = sorted((REPO / "notebooks").glob("[0-9][0-9]_*.ipynb"))
CHINESE = editions.lessons("zh")
GLOSSARY_LINK = re.compile(r"\[([^\]]+)\]\((?:\.\./)+docs/glossary\.md#([\w-]+)\)")
RELATIVE_LINK = re.compile(r"\]\((?!https?:|#|mailto:)([^)\s#]+)(?:#[^)\s]*)?\)")
# Chinese citations: 论文 (the paper) named with its authors or year, 表 2, 第 4 节, 图 1
SOURCE_ZH = re.compile(r"论文|表\s*\d|第\s*\d+(?:\.\d+)?\s*[节章]|图\s*\d")
REFERENCE_BEFORE_ZH = re.compile(r"(第|表|图|附录)\s*$")


def _cells(path: Path) -> list[dict]:
    return json.loads(path.read_text(encoding="utf-8"))["cells"]


def _markdown(cell) -> str:
    return "".join(cell["source"]) if cell["cell_type"] == "markdown" else ""


def test_every_lesson_has_its_chinese_edition():
    assert [p.name for p in CHINESE] == [p.name for p in ENGLISH], (
        "notebooks/zh/ lacks (or has extra) lessons: write them with `python -m bertedu.course.editions dump NN`")


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_code_and_outputs_are_the_english_ones(path):
    assert editions.differences(path) == []


@pytest.mark.slow
def test_own_cells_print_what_they_stored():
    from bertedu.course.edition_run import run

    assert run(CHINESE) == []


def unsourced_numbers_zh(markdown: str, outputs: str) -> list[str]:
    """tests/test_claims.py's rule over Chinese prose: sentences end at 。！？; and at English ones."""
    missing = []
    for block in blocks(checked_text(markdown)):
        quoted = all(line.lstrip().startswith(">") for line in block.strip().splitlines())
        for sentence in re.split(r"(?<=[。！？；])|(?<=[.!?])\s+(?=[A-Z])", block):
            sentence = sentence or ""
            cited = quoted or SOURCE.search(sentence) or SOURCE_ZH.search(sentence)
            for m in DECIMAL.finditer(sentence):
                before = sentence[: m.start()][-12:]
                if cited or any(p.search(before) for p in (REFERENCE_BEFORE, REFERENCE_BEFORE_ZH, VERSION_BEFORE)):
                    continue
                if not printed(m.group(1), outputs):
                    missing.append(f"{m.group(1)} in: ...{sentence[max(0, m.start() - 40): m.end() + 20]}...")
    return missing


def test_the_chinese_claims_rule_catches_a_typed_in_number():
    outputs = "test accuracy 0.723"
    assert unsourced_numbers_zh("模型在测试集上达到 0.723。另一次运行达到 0.649。", outputs)[0].startswith("0.649")
    assert unsourced_numbers_zh("论文（Devlin et al., 2019）报告 93.5。见第 4.1 节。", outputs) == []


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_every_number_in_the_chinese_prose_is_printed_or_cited(path):
    cells = _cells(path)
    outputs = notebook_outputs(cells)
    missing = [f"cell {i}: {m}" for i, c in enumerate(cells) for m in unsourced_numbers_zh(_markdown(c), outputs)]
    assert missing == [], f"{path.name}: numbers no output prints and no citation covers:\n" + "\n".join(missing)


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_lesson_limits_hold_for_the_chinese_edition(path):
    report = lesson_report(path)
    assert report["edition"] == "zh"
    assert problems(report) == set(), {k: report[k] for k in ("words", "cells", "longest_code")}


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_exercise_rules_hold_for_the_chinese_edition(path):
    assert exercise_rules.violations(path) == []


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_the_map_comes_first_and_speaks_chinese(path):
    cells = _cells(path)
    first = next(c for c in cells if "you_are_here(" in "".join(c["source"]))
    assert editions.is_own(first) and 'i18n.use("zh")' in "".join(first["source"]), (
        f"{path.name}: the map should be an own cell that switches to Chinese (i18n.use(\"zh\")) before drawing")
    assert any("image/png" in o.get("data", {}) for o in first.get("outputs", [])), "the map's picture is stored"


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_code_cells_are_numbered_top_to_bottom(path):
    counts = [c.get("execution_count") for c in _cells(path) if c["cell_type"] == "code"]
    assert counts == list(range(1, len(counts) + 1)), f"{path.name}: run `python -m bertedu.course.editions sync`"


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_every_cell_has_slide_metadata_and_the_title_opens_the_deck(path):
    kinds = [c.get("metadata", {}).get("slideshow", {}).get("slide_type") for c in _cells(path)]
    assert None not in kinds and kinds[0] == "slide", f"{path.name}: load the lesson again (editions load)"


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_relative_links_resolve(path):
    broken = [t for c in _cells(path) for t in RELATIVE_LINK.findall(_markdown(c))
              if not (path.parent / t).resolve().exists()]
    assert broken == [], f"{path.name}: links to nothing: {broken}"


def _chinese_terms() -> dict[str, str]:
    from bertedu.course.glossary import terms

    return {anchor: chinese for anchor, _english, chinese in terms()}


@pytest.mark.parametrize("path", CHINESE, ids=lambda p: p.name[:2])
def test_glossary_terms_are_linked_in_both_editions_with_the_glossarys_chinese(path):
    english = {a for c in _cells(editions.english_of(path)) for _t, a in GLOSSARY_LINK.findall(_markdown(c))}
    links = [(text, a) for c in _cells(path) for text, a in GLOSSARY_LINK.findall(_markdown(c))]
    assert english <= {a for _t, a in links}, f"{path.name}: glossary terms the English links, not linked here"
    chinese = _chinese_terms()
    unknown = [a for _t, a in links if a not in chinese]
    assert unknown == [], f"{path.name}: links to glossary anchors that do not exist: {unknown}"
    wrong = [(t, a) for t, a in links if not any(w and w in t for w in re.split(r"[、/（）()，,\s]+", chinese[a]))]
    assert wrong == [], f"{path.name}: glossary links whose text is not the glossary's Chinese term: {wrong}"


RELATIVE_PATH = re.compile(r"""["'](?:\.\.?/|appendix/|figures/)[^"']*["']""")


@pytest.mark.parametrize("path", ENGLISH, ids=lambda p: p.name[:2])
def test_no_english_code_names_a_path_relative_to_its_folder(path):
    """A Chinese lesson runs the English code one folder deeper (notebooks/zh/): a path such as "../docs/x.md"
    would name another file there. Find the file from the repository instead (Path.cwd().parents)."""
    found = [m.group(0) for c in _cells(path) if c["cell_type"] == "code" for m in RELATIVE_PATH.finditer("".join(c["source"]))]
    assert found == [], f"{path.name}: paths relative to the lesson's folder: {found}"


# --- the tools themselves, on a copy of a lesson ---------------------------------------------------------------


@pytest.fixture
def course(tmp_path, monkeypatch):
    """notebooks/08 and notebooks/zh/08 in a temporary course, the Chinese one made by `load` from a dump."""
    from bertedu.course import edition_text

    (tmp_path / "zh").mkdir()
    source = REPO / "notebooks" / "08_single_sentence_classification.ipynb"
    (tmp_path / source.name).write_bytes(source.read_bytes())
    monkeypatch.setattr(edition_cells, "ENGLISH", tmp_path)
    monkeypatch.setattr(edition_cells, "EDITIONS", {"zh": tmp_path / "zh"})
    text = edition_text.dump("08").replace("Single-sentence classification", "单句分类", 1)
    edition_text.load("08", text)
    return tmp_path / source.name, tmp_path / "zh" / source.name


def test_a_loaded_dump_is_in_step_and_keeps_its_prose(course):
    english, chinese = course
    assert editions.differences(chinese) == []
    assert "单句分类" in "".join(nbformat.read(chinese, as_version=4).cells[0].source)


def test_a_change_to_the_english_code_is_seen_and_carried_over_by_sync(course):
    english, chinese = course
    nb = nbformat.read(english, as_version=4)
    code = [c for c in nb.cells if c.cell_type == "code"]
    code[3].outputs = [nbformat.v4.new_output("stream", name="stdout", text="a new output\n")]
    nb.cells.insert(nb.cells.index(code[5]) + 1, nbformat.v4.new_code_cell("print('new cell')"))
    nbformat.write(nb, english)
    found = editions.differences(chinese)
    assert found and "differs from English" in found[0]
    changes = editions.sync(chinese)
    assert any(c.startswith("updated") for c in changes) and any(c.startswith("added") for c in changes)
    assert editions.differences(chinese) == []


def test_changed_english_prose_makes_the_chinese_prose_stale(course):
    english, chinese = course
    nb = nbformat.read(english, as_version=4)
    nb.cells[0].source += "\nA new sentence."
    nbformat.write(nb, english)
    assert any("has changed since" in p for p in editions.differences(chinese))


def test_an_own_cell_replacing_a_changed_english_cell_is_reported(course):
    from bertedu.course import edition_text

    english, chinese = course
    nb = nbformat.read(english, as_version=4)
    target = next(c for c in nb.cells if c.cell_type == "code" and "you_are_here" in c.source)
    text = edition_text.dump("08").replace(
        f"<!-- code {target.id} -->", f"<!-- own replaces {target.id} -->\n```python\nprint('地图')\n```\n")
    edition_text.load("08", text)
    assert editions.differences(chinese) == []
    target.source += "\n# changed"
    nbformat.write(nb, english)
    assert any("has changed: update the own cell" in p for p in editions.differences(chinese))
