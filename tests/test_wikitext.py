"""WikiText read by article (bertedu.data.wikitext), offline, on a sample in its format."""

import importlib.util

import pytest

from bertedu.data import corpora
from bertedu.data.corpora import hf_wikitext, load_corpus
from bertedu.data.wikitext import heading_level, is_wikitext_file, undo_marks, wikitext_articles

# The layout of wiki.train.tokens: a space before every line, blank lines between blocks.
SAMPLE = """ 
 = Valkyria Chronicles III = 
 
 Senjō no Valkyria 3 is a 2011 role @-@ playing video game . It sold 1 @,@ 000 copies in a week . 
 
 = = Gameplay = = 
 
 The map is 3 @.@ 5 km wide . Squads move in turns . 
 
 = = = Units = = = 
 
 Each unit has a class . 
 
 = Tower Building of the Little Rock Arsenal = 
 
 The Tower Building was built in 1840 . 
"""

ARTICLES = [
    ["Senjō no Valkyria 3 is a 2011 role-playing video game .", "It sold 1,000 copies in a week .",
     "The map is 3.5 km wide .", "Squads move in turns .", "Each unit has a class ."],
    ["The Tower Building was built in 1840 ."],
]


def test_heading_levels():
    assert [heading_level(line) for line in (" = A = ", " = = B = = ", " = = = C = = = ", " A = B . ", " ")] == [
        1, 2, 3, 0, 0]


def test_marks_are_undone():
    assert undo_marks("a 2 @,@ 500 @-@ seat hall of 3 @.@ 5 m") == "a 2,500-seat hall of 3.5 m"


def test_titles_start_articles_and_sections_stay_inside():
    assert list(wikitext_articles(SAMPLE.splitlines(keepends=True))) == ARTICLES


def test_a_local_wikitext_file_is_read_by_article(tmp_path):
    path = tmp_path / "wiki.train.tokens"
    path.write_text(SAMPLE, encoding="utf-8")
    corpus = load_corpus(str(path))
    assert list(corpus) == ARTICLES and corpus.lang == "en"
    other = tmp_path / "wikitext.txt"  # any other name: BERT's format, a line a sentence
    other.write_text(SAMPLE, encoding="utf-8")
    assert len(list(load_corpus(str(other)))) == 8  # blank lines separate "documents", headings and all
    assert is_wikitext_file("wiki.valid.raw") and not is_wikitext_file("wikitext.txt")


def test_hub_rows_are_grouped_into_articles(monkeypatch):
    rows = [{"text": line} for line in SAMPLE.splitlines(keepends=True)]  # the Hub's layout: a row per line
    assert list(hf_wikitext(rows)) == ARTICLES
    monkeypatch.setattr(corpora, "load_hf_dataset", lambda name, config=None, split="train": rows)
    assert list(load_corpus("hf:wikitext:wikitext-103-raw-v1")) == ARTICLES
    other = [{"text": "One row. A document."}]
    monkeypatch.setattr(corpora, "load_hf_dataset", lambda name, config=None, split="train": other)
    assert list(load_corpus("hf:someone/books")) == [["One row.", "A document."]]


def test_a_real_datasets_object_in_wikitext_form():
    if importlib.util.find_spec("datasets") is None:
        pytest.skip("datasets is not installed")
    import datasets

    dataset = datasets.Dataset.from_dict({"text": SAMPLE.splitlines(keepends=True)})
    assert list(hf_wikitext(dataset)) == ARTICLES


def test_no_articles_is_a_clear_error():
    with pytest.raises(ValueError, match="is empty"):
        list(hf_wikitext([{"text": " = Only a title = \n"}]))
