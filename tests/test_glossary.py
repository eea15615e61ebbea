"""docs/glossary.md, the single source of the Chinese edition's terms, reads as a table of terms
(bertedu.course.glossary): every row parses, anchors are unique, every Chinese cell names a Chinese word,
and every glossary link of the lessons and pages names a term."""
import doctest
import json
import re
from pathlib import Path

import pytest

from bertedu.course import glossary

REPO = Path(__file__).resolve().parents[1]
CJK = re.compile(r"[\u4e00-\u9fff]")


def test_every_row_of_the_table_is_a_term():
    text = glossary.GLOSSARY.read_text(encoding="utf-8")
    rows = [line for line in text.splitlines() if line.startswith("| <a id=")]
    terms = glossary.terms()
    assert len(terms) == len(rows) >= 70
    assert all(t.english and "<a" not in t.english and "|" not in t.english for t in terms)


def test_anchors_are_unique():
    anchors = [t.anchor for t in glossary.terms()]
    assert len(anchors) == len(set(anchors)), sorted(a for a in anchors if anchors.count(a) > 1)
    assert set(glossary.by_anchor()) == set(anchors)


def test_every_chinese_cell_names_chinese_words():
    for term in glossary.terms():
        words = glossary.chinese_words(term.chinese)
        assert words, term
        assert "：" not in term.chinese, f"{term.anchor}: list words with 、 or / (the book's search splits there)"
        assert any(CJK.search(w) for w in glossary.chinese_words(term.chinese, aliases=True)), term


def test_the_terms_the_issue_names_are_d2ls():
    """Issue 58 item 1's terms, as d2l's Chinese edition writes them (the sources at the glossary's end)."""
    chinese = {t.anchor: t.chinese for t in glossary.terms()}
    assert chinese["token"] == "词元" and chinese["mlm"] == "掩蔽语言模型" and chinese["nsp"] == "下一句预测"
    assert chinese["fine-tuning"] == "微调" and chinese["layernorm"] == "层规范化"
    assert "片段" in glossary.chinese_words(chinese["segment"])
    assert "多头注意力" in glossary.chinese_words(chinese["multi-head"])
    assert "位置嵌入" in glossary.chinese_words(chinese["token-embedding"])
    assert chinese["positional-encoding"] == "位置编码"


def test_chinese_words_splits_a_cell_and_keeps_aliases_apart():
    assert glossary.chinese_words("词元嵌入 / 片段嵌入 / 位置嵌入") == ["词元嵌入", "片段嵌入", "位置嵌入"]
    assert glossary.chinese_words("特殊词元：分类词元、分隔词元") == ["特殊词元", "分类词元", "分隔词元"]
    assert glossary.chinese_words("（任务）输出层 / 头") == ["输出层", "头"]
    assert glossary.chinese_words("判定规则（t 分布）、自由度") == ["判定规则", "自由度"]
    assert glossary.chinese_words("判定规则（t 分布）、自由度", aliases=True) == ["判定规则", "自由度", "t 分布"]


def test_a_row_that_does_not_parse_is_an_error(tmp_path):
    page = tmp_path / "glossary.md"
    page.write_text('| English | 中文 | where | in one line |\n|---|---|---|---|\n'
                    '| <a id="a"></a>a | 甲 | 00 | one |\n| <a id="b"></a>b | 乙 | 00 |\n', encoding="utf-8")
    with pytest.raises(ValueError, match="4 cells"):
        glossary.terms(page)
    page.write_text('| <a id="a"></a>a |  | 00 | one |\n', encoding="utf-8")
    with pytest.raises(ValueError, match="empty"):
        glossary.terms(page)
    page.write_text('| <a id="a"></a>a | 甲 | 00 | one |\n', encoding="utf-8")
    assert glossary.terms(page) == [glossary.Term("a", "a", "甲")]


def _glossary_links() -> dict[str, set[str]]:
    """The glossary anchors each lesson (both editions, appendices too) and page links."""
    links = {}
    pages = [*REPO.glob("*.md"), *(REPO / "docs").glob("*.md")]
    notebooks = [*(REPO / "notebooks").glob("**/*.ipynb")]
    for path in pages + notebooks:
        if path.suffix == ".ipynb":
            cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
            text = "\n".join("".join(c["source"]) for c in cells if c["cell_type"] == "markdown")
        else:
            text = path.read_text(encoding="utf-8")
        found = set(re.findall(r"glossary\.md#([\w-]+)", text))
        if found:
            links[str(path.relative_to(REPO))] = found
    return links


def test_every_glossary_link_names_a_term():
    anchors = set(glossary.by_anchor())
    links = _glossary_links()
    assert len(links) >= 10  # the lessons link their terms
    unknown = {page: sorted(found - anchors) for page, found in links.items() if found - anchors}
    assert unknown == {}


def test_the_module_examples_hold():
    assert doctest.testmod(glossary).failed == 0


def test_the_command_prints_one_line_per_term(capsys):
    assert glossary.main([]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == len(glossary.terms()) and lines[0].split("\t") == list(glossary.terms()[0])
