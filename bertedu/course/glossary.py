"""The course's terms, read from docs/glossary.md: the single source of the Chinese edition's words.

    >>> from bertedu.course import glossary
    >>> [t for t in glossary.terms() if t.anchor == "mlm"]
    [Term(anchor='mlm', english='masked language model (MLM)', chinese='掩蔽语言模型')]
    >>> glossary.chinese_words("前馈网络（基于位置的前馈网络）")
    ['前馈网络']

Each row of the glossary's table is one term: its anchor (the ``<a id>`` that lessons link to,
``docs/glossary.md#mlm``), the English cell and the Chinese cell. A Chinese cell may name several
words (split by 、 / ： or ，); text in full-width parentheses is an alias or a gloss
(``chinese_words(cell, aliases=True)`` includes its words). Tests and the lead's checks of the Chinese
lessons (notebooks/zh/) read the terms from here, so the table is written once.

``python -m bertedu.course.glossary`` prints the terms as tab-separated lines.

Introduced for the Chinese edition (issue 58); the table is docs/glossary.md.
May import: nothing of bertedu.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import NamedTuple, Optional, Sequence

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "glossary.md"
ROW = re.compile(r'^\|\s*<a id="([\w-]+)"></a>')
ANCHOR = re.compile(r'<a id="[\w-]+"></a>')
PARENTHESES = re.compile(r"（([^（）]*)）")
SEPARATORS = re.compile(r"[、/：，;；]")


class Term(NamedTuple):
    """One row of the glossary: the anchor lessons link, the English and the Chinese cell."""

    anchor: str
    english: str
    chinese: str


def _cells(line: str) -> list[str]:
    """The cells of a markdown table row (no cell of the glossary holds a `|`)."""
    return [cell.strip() for cell in line.strip().strip("|").split("|")]


def terms(path: Path | str = GLOSSARY) -> list[Term]:
    """Every term of the glossary's table, in its order; a row that does not parse raises ValueError."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), start=1):
        match = ROW.match(line)
        if not match:
            continue
        cells = _cells(line)
        if len(cells) != 4:
            raise ValueError(f"{path}:{number}: a term's row has 4 cells (English, 中文, where, in one line), "
                             f"this one {len(cells)}: {line!r}")
        english = ANCHOR.sub("", cells[0]).strip()
        chinese = cells[1]
        if not english or not chinese:
            raise ValueError(f"{path}:{number}: term {match.group(1)!r} has an empty English or Chinese cell")
        out.append(Term(match.group(1), english, chinese))
    return out


def chinese_words(cell: str, aliases: bool = False) -> list[str]:
    """The words a Chinese cell names: split at 、 / ： ，, parenthesised text left out (or, with
    `aliases`, split and added after them)."""
    inside = PARENTHESES.findall(cell) if aliases else []
    words = []
    for part in [PARENTHESES.sub("", cell), *inside]:
        words += [w.strip() for w in SEPARATORS.split(part) if w.strip()]
    return words


def by_anchor(path: Path | str = GLOSSARY) -> dict[str, Term]:
    """The terms keyed by anchor (the glossary's anchors are unique; tests/test_glossary.py)."""
    return {term.anchor: term for term in terms(path)}


def main(argv: Optional[Sequence[str]] = None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bertedu.course.glossary", description=__doc__.split("\n")[0])
    parser.add_argument("--path", default=str(GLOSSARY), help="the glossary (default: docs/glossary.md)")
    args = parser.parse_args(argv)
    for term in terms(args.path):
        print(f"{term.anchor}\t{term.english}\t{term.chinese}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
