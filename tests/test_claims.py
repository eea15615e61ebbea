"""Every number the course's prose states comes from somewhere a reader can see.

A decimal number in a notebook's markdown is printed by an output of that notebook, or it is a
citation: its sentence names a source (an author and year, a paper's section or table, "the
paper"), or it sits in a quotation (a `>` line). A number inside code or LaTeX math is part of
a definition, not a result, and is not checked; nor is a section or table number, or a version
(Python 3.10, torch 2.4).

A decimal number in README.md or TEACHING.md names its record: its table row, list item or
paragraph links to (or names) a file of the repository (a results page, a benchmark record, a
notebook) whose text, or for a notebook whose outputs, contains that number.
"""
import json
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted([*(REPO / "notebooks").glob("*.ipynb"), *(REPO / "notebooks").glob("appendix/*.ipynb")])  # the lessons and their appendix

FENCE = re.compile(r"^(```|~~~).*?^\1[ \t]*$", re.S | re.M)
INLINE_CODE = re.compile(r"`[^`\n]*`")
DISPLAY_MATH = re.compile(r"\$\$.*?\$\$", re.S)
INLINE_MATH = re.compile(r"(?<![\\$])\$(?!\$)[^$\n]+?\$")
LINK_TARGET = re.compile(r"\]\(([^)\s]+)\)")
HTML_COMMENT = re.compile(r"<!--.*?-->", re.S)
# 0.707, 93.5, 1.3 (not a version such as 2.13.0, not part of a word such as v1.1)
DECIMAL = re.compile(r"(?<![\w.])(\d+\.\d+)(?![\d.]*\d)")
REFERENCE_BEFORE = re.compile(r"(§|\b(?:[Ss]ections?|[Tt]ables?|[Ff]igures?|[Ee]q\.?|[Aa]ppendix)\s*)$")
SOURCE = re.compile(r"et al\.?,? \(?(?:19|20)\d\d|\b[A-Z][a-z]+ (?:and [A-Z][a-z]+ )?\(?(?:19|20)\d\d\b|"
                    r"§\s*\d|\b[Ss]ection \d|\bTable \d|\bthe paper\b|\bthe papers?'s\b")
VERSION_BEFORE = re.compile(r"\b(?:Python|torch|WordNet|[Vv]ersion|CUDA|release)\s*(?:[≥≤<>=]=?\s*)?$")
ABBREVIATIONS = ("et al.", "e.g.", "i.e.", "cf.", "vs.", "approx.")


def checked_text(markdown: str) -> str:
    """The prose of a markdown text: code, math, comments and link targets removed."""
    for pattern in (FENCE, HTML_COMMENT, DISPLAY_MATH, INLINE_CODE, INLINE_MATH):
        markdown = pattern.sub(" ", markdown)
    return LINK_TARGET.sub("]", markdown)


def blocks(markdown: str) -> list[str]:
    """Paragraphs, list items and table rows: a number's record is named in its own block."""
    out = []
    for paragraph in re.split(r"\n\s*\n", markdown):
        out.extend(p for p in re.split(r"\n(?=\s*(?:[*+-]|\d+\.|\|)\s)", paragraph) if p.strip())
    return out


def sentences(block: str) -> list[str]:
    parts = re.split(r"(?<=[.!?])\s+(?=[A-Z(*\"“'_])", block)
    merged: list[str] = []
    for part in parts:
        if merged and merged[-1].endswith(ABBREVIATIONS):
            merged[-1] += " " + part
        else:
            merged.append(part)
    return merged


def printed(number: str, text: str) -> bool:
    return re.search(rf"(?<![\d.]){re.escape(number)}(?!\d)", text) is not None


def unsourced_numbers(markdown: str, outputs: str) -> list[str]:
    """The decimal numbers of `markdown` that `outputs` never prints and no citation covers."""
    missing = []
    for block in blocks(checked_text(markdown)):
        quoted = all(line.lstrip().startswith(">") for line in block.strip().splitlines())
        for sentence in sentences(block):
            cited = quoted or SOURCE.search(sentence) is not None
            for m in DECIMAL.finditer(sentence):
                before = sentence[: m.start()][-12:]
                if cited or REFERENCE_BEFORE.search(before) or VERSION_BEFORE.search(before) or printed(m.group(1), outputs):
                    continue
                missing.append(f"{m.group(1)} in: ...{' '.join(sentence[max(0, m.start() - 70) : m.end() + 30].split())}...")
    return missing


def notebook_outputs(cells: list[dict]) -> str:
    parts = []
    for cell in cells:
        for output in cell.get("outputs", []):
            parts.append("".join(output.get("text", "")))
            parts.extend("".join(v) for k, v in output.get("data", {}).items() if k.startswith("text/"))
    return "\n".join(parts)


def test_the_rule_catches_a_typed_in_number_and_passes_printed_and_cited_ones():
    outputs = "test accuracy 0.723\nlr 0.0005"
    markdown = ("The model reached 0.723 on test. It reached 0.649 in another run.\n\n"
                "Devlin et al. 2019 report 93.5% on SST-2. Section 4.1 of the paper fixes the batch size.\n\n"
                "> the quoted source says 3.3 billion words\n\n"
                "The tolerance $0.01$ and `p=0.15` are definitions. Version 2.13.0 is not a result.")
    assert [m.split(" in:")[0] for m in unsourced_numbers(markdown, outputs)] == ["0.649"]
    assert unsourced_numbers("A gap of 0.72.", "0.723") != []  # 0.72 is not 0.723


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=lambda p: p.name)
def test_every_decimal_number_in_a_notebooks_prose_is_printed_there_or_cited(notebook):
    cells = json.loads(notebook.read_text(encoding="utf-8"))["cells"]
    outputs = notebook_outputs(cells)
    missing = [f"cell {i}: {m}" for i, cell in enumerate(cells) if cell["cell_type"] == "markdown"
               for m in unsourced_numbers("".join(cell["source"]), outputs)]
    assert missing == [], (
        f"{notebook.name}: numbers in the prose that no output of the notebook prints and no citation covers "
        "(print them from a computation or a recorded results file, cite their source, or leave them out):\n"
        + "\n".join(missing))


def record_text(name: str, page: Path) -> str:
    """The text a README block's link or file name points to ('' if it is not a repository file)."""
    path = (page.parent / name.partition("#")[0]).resolve()
    if not path.is_file() or REPO not in path.parents:
        return ""
    if path.suffix == ".ipynb":
        return notebook_outputs(json.loads(path.read_text(encoding="utf-8"))["cells"])
    return path.read_text(encoding="utf-8", errors="replace")


FILE_NAME = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)+[\w.-]+\.(?:md|json|ipynb|txt|csv))\b")


def unrecorded_figures(page: Path) -> list[str]:
    """The decimal numbers of a page that the records its blocks name do not contain."""
    markdown = page.read_text(encoding="utf-8")
    missing = []
    for raw in blocks(HTML_COMMENT.sub(" ", FENCE.sub(" ", markdown))):
        names = LINK_TARGET.findall(raw) + FILE_NAME.findall(INLINE_CODE.sub(lambda m: m.group(0)[1:-1], raw))
        records = "\n".join(record_text(name, page) for name in names)
        text = checked_text(raw)
        for m in DECIMAL.finditer(text):
            before = text[: m.start()]
            if REFERENCE_BEFORE.search(before[-12:]) or VERSION_BEFORE.search(before[-12:]) or printed(m.group(1), records):
                continue
            missing.append(f"{m.group(1)} in: ...{' '.join(text[max(0, m.start() - 70) : m.end() + 30].split())}...")
    return missing


@pytest.mark.parametrize("page", ["README.md", "TEACHING.md", "README.zh-CN.md", "TEACHING.zh-CN.md"])
def test_every_figure_in_the_readme_and_teaching_guide_equals_the_record_it_names(page):
    missing = unrecorded_figures(REPO / page)
    assert missing == [], (
        f"{page}: figures that no record named beside them (a link or a repository file name in the same table "
        "row, list item or paragraph) contains:\n" + "\n".join(missing))
