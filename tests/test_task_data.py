"""The embedded fine-tuning tasks (real data, offline) and the --task dispatcher."""

import functools
import json
import os
import re
import subprocess
import sys
from collections import Counter

import pytest

from bertedu.data import corpora, task_data
from bertedu.data.corpora import BIBLE_TRANSLATIONS, word_overlap
from bertedu.data.formats import TaskData, starts_entity_with_i
from bertedu.data.task_data import (
    BLANK,
    MAX_NEGATIVE_OVERLAP,
    char_bio,
    cloze_candidates,
    load_task,
    split_three,
)

# ----------------------------------------------------------------------------------------
# Each task is built twice: the second time from memoised sources (the same text, read
# once), to check that the same seed gives the same splits without re-reading the files.
# ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def sources():
    """Memoising wrappers of the corpora the tasks read, patched into task_data."""
    articles = functools.cache(lambda: list(corpora.wiki_en_articles()))
    documents = functools.cache(lambda: list(corpora.peoples_daily_words()))
    bibles = functools.cache(corpora.bible_verses)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(task_data, "wiki_en_articles", lambda: iter(articles()))
        patch.setattr(task_data, "peoples_daily_words", lambda: iter(documents()))
        patch.setattr(task_data, "bible_verses", bibles)
        yield {"bible": bibles}


BUILDERS = {
    "sentiment-zh": task_data.sentiment_zh,
    "topic-en": task_data.topic_en,
    "ner-en": task_data.ner_en,
    "ner-zh": task_data.ner_zh,
    "paraphrase-en": task_data.paraphrase_en,
    "qa-cloze-en": task_data.qa_cloze_en,
}


@pytest.fixture(scope="module")
def tasks(sources):
    return {name: build() for name, build in BUILDERS.items()}


def ids(task: TaskData) -> dict[str, list[str]]:
    return {name: [example.id for example in split] for name, split in task.splits().items()}


@pytest.mark.slow
def test_splits_are_deterministic_and_disjoint(tasks, sources):
    for name, build in BUILDERS.items():
        task = tasks[name]
        if name == "ner-zh":  # the slowest to build: check max_train on the way
            again = build(max_train=1_000)
            assert len(again.train) == 1_000 and {e.id for e in again.train} <= {e.id for e in task.train}
            assert ids(again)["dev"] == ids(task)["dev"] and ids(again)["test"] == ids(task)["test"]
        else:
            assert ids(build()) == ids(task), name  # same seed, same splits, same order
        train, dev, test = (set(i) for i in ids(task).values())
        assert len(train) == len(task.train) and not train & dev and not train & test and not dev & test, name
        assert task.name == name and task.description
    other = task_data.sentiment_zh(seed=1)
    assert ids(other)["test"] != ids(tasks["sentiment-zh"])["test"]


@pytest.mark.slow
def test_splits_are_the_same_in_another_process(tasks, sources):
    """Same ids under another hash seed: nothing depends on set or dict-of-str order."""
    script = (
        "import json; from bertedu.data import task_data as t\n"
        "print(json.dumps({n: {s: [e.id for e in x][:300] for s, x in f().splits().items()}\n"
        "    for n, f in [('sentiment-zh', t.sentiment_zh), ('ner-en', t.ner_en),\n"
        "                 ('paraphrase-en', lambda: t.paraphrase_en(n_pairs=2_000))]}))"
    )
    env = {**os.environ, "PYTHONHASHSEED": "12345"}
    output = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, env=env, check=True)
    theirs = json.loads(output.stdout)
    ours = {"sentiment-zh": tasks["sentiment-zh"], "ner-en": tasks["ner-en"],
            "paraphrase-en": task_data.paraphrase_en(n_pairs=2_000)}
    for name, task in ours.items():
        assert theirs[name] == {split: names[:300] for split, names in ids(task).items()}, name


def test_split_three():
    train, dev, test = split_three(range(100), seed=7)
    assert (len(train), len(dev), len(test)) == (80, 10, 10)
    assert sorted(train + dev + test) == list(range(100))
    assert split_three(range(100), seed=7) == (train, dev, test) != split_three(range(100), seed=8)


# ----------------------------------------------------------------------------------------
# English topics (WordNet definitions)
# ----------------------------------------------------------------------------------------


def test_topic_en_is_balanced_definitions_without_headwords_or_leaks(tasks):
    task = tasks["topic-en"]
    assert task.kind == "classification" and task.language == "en"
    assert task.labels == ["animal", "artifact", "food", "location", "person", "plant"]
    assert (len(task.train), len(task.dev), len(task.test)) == (12_000, 1_500, 1_500)
    for split in task.splits().values():
        assert set(Counter(e.label for e in split).values()) == {len(split) // 6}  # 1/6 each: majority 1/6
    texts = [{e.text_a for e in split} for split in task.splits().values()]
    assert sum(map(len, texts)) == len(set.union(*texts))  # no definition twice, none in two splits
    dog = "a member of the genus Canis (probably descended from the common wolf) that has been domesticated by " \
          "man since prehistoric times; occurs in many breeds"
    assert task_data.wordnet_definition(f"dog, domestic dog, Canis familiaris: {dog}; \"the dog barked all night\"") == dog
    assert not any('; "' in e.text_a for split in task.splits().values() for e in split)  # no usage examples


# ----------------------------------------------------------------------------------------
# Chinese sentiment
# ----------------------------------------------------------------------------------------


def test_sentiment_zh_sizes_balance_and_no_leak(tasks):
    task = tasks["sentiment-zh"]
    assert task.kind == "classification" and task.labels == ["neg", "pos"] and task.language == "zh"
    # 8,379 + 9,078 distinct reviews, less 47 in both files and 26 form headings
    assert (len(task.train), len(task.dev), len(task.test)) == (13_872, 1_734, 1_733)
    for split in task.splits().values():
        counts = Counter(example.label for example in split)
        assert 0.47 <= counts["pos"] / len(split) <= 0.49  # stratified: the same balance everywhere
        assert all(example.text_a and example.text_b is None for example in split)
    texts = [{example.text_a for example in split} for split in task.splits().values()]
    assert sum(map(len, texts)) == len(set.union(*texts))  # no review in two splits, none repeated
    assert "优点：" not in set.union(*texts) and "没有住过这么差的2星级酒店：" in set.union(*texts)
    positives = " ".join(e.text_a for e in task.train + task.dev + task.test if e.label == "pos")
    assert "我正在写这本书的心得" in positives  # the first line of pos.txt


def test_embedded_files_are_checked(monkeypatch):
    changed = task_data.SENTIMENT_NEG.__class__(**{**task_data.SENTIMENT_NEG.__dict__, "sha256": "0" * 64})
    monkeypatch.setattr(task_data, "SENTIMENT_NEG", changed)
    with pytest.raises(ValueError, match="neg.txt has changed"):
        task_data.sentiment_zh()


# ----------------------------------------------------------------------------------------
# NER
# ----------------------------------------------------------------------------------------


def check_bio(task: TaskData) -> Counter:
    """Every tag is one of the task's labels and the sequences are valid BIO; returns the
    entity counts by type."""
    entities = Counter()
    for split in task.splits().values():
        for example in split:
            assert len(example.tokens) == len(example.tags) > 0
            assert set(example.tags) <= set(task.labels)
            assert not starts_entity_with_i(example.tags), example
            entities.update(tag[2:] for tag in example.tags if tag.startswith("B-"))
    return entities


def test_ner_en(tasks):
    task = tasks["ner-en"]
    assert task.kind == "tagging" and task.labels[0] == "O" and len(task.labels) == 21
    assert (len(task.train), len(task.dev), len(task.test)) == (1_836, 230, 229)  # 2,295 distinct tweets
    entities = check_bio(task)
    assert set(entities) == {"company", "facility", "geo-loc", "movie", "musicartist", "other", "person",
                             "product", "sportsteam", "tvshow"}
    assert 1_380 <= sum(entities.values()) <= 1_480 and entities.most_common(1)[0][0] == "person"
    tweets = [{" ".join(e.tokens) for e in split} for split in task.splits().values()]
    assert sum(map(len, tweets)) == len(set.union(*tweets))


def test_char_bio_people_names_and_places():
    words = [("陈", "nr"), ("方", "nr"), ("安生", "nr"), ("会见", "v"), ("米洛舍维奇", "nr"), ("、", "w"),
             ("欧阳", "nr"), ("修", "nr"), ("江", "nr"), ("泽民", "nr"), ("李", "nr"), ("鹏", "nr"),
             ("在", "p"), ("北京", "ns"), ("天安门", "ns"), ("新华社", "nt"), ("中华", "nz")]
    chars, tags = char_bio(words)
    assert "".join(chars) == "".join(word for word, _ in words) and len(chars) == len(tags)
    spans, start = [], None
    for i, tag in enumerate(tags + ["O"]):
        if start is not None and not tag.startswith("I-"):
            spans.append(("".join(chars[start:i]), tags[start][2:]))
            start = None
        if tag.startswith("B-"):
            start = i
    assert spans == [("陈方安生", "PER"), ("米洛舍维奇", "PER"), ("欧阳修", "PER"), ("江泽民", "PER"),
                     ("李鹏", "PER"), ("北京", "LOC"), ("天安门", "LOC"), ("新华社", "ORG")]


def test_ner_zh(tasks):
    task = tasks["ner-zh"]
    assert task.labels == ["O", "B-LOC", "I-LOC", "B-ORG", "I-ORG", "B-PER", "I-PER"] and task.language == "zh"
    sizes = len(task.train), len(task.dev), len(task.test)
    assert sum(sizes) == 47_237 and 36_000 <= sizes[0] <= 39_000 and min(sizes[1:]) >= 4_000
    entities = check_bio(task)
    assert set(entities) == {"PER", "LOC", "ORG"} and entities["LOC"] > entities["PER"] > entities["ORG"] > 3_000
    first = next(e for e in task.train + task.dev + task.test if e.id == "d0-s1")
    assert "".join(first.tokens) == "中共中央总书记、国家主席江泽民"
    assert first.tags[:4] == ["B-ORG", "I-ORG", "I-ORG", "I-ORG"] and first.tags[-3:] == ["B-PER", "I-PER", "I-PER"]
    assert all(len(token) == 1 for e in task.dev for token in e.tokens)  # one tag per character
    articles = [{e.id.split("-")[0] for e in split} for split in task.splits().values()]
    assert sum(map(len, articles)) == len(set.union(*articles)) == 3_333  # split by article


# ----------------------------------------------------------------------------------------
# Paraphrase
# ----------------------------------------------------------------------------------------


def parse_pair(example):
    """"hard:1001002.kjv~1001003.web" -> ("hard", 1001002, "kjv", 1001003, "web")."""
    kind, a, b = re.fullmatch(r"(\w+):(\d+\.\w+)~(\d+\.\w+)", example.id).groups()
    (verse_a, trans_a), (verse_b, trans_b) = a.split("."), b.split(".")
    return kind, int(verse_a), trans_a, int(verse_b), trans_b


def test_paraphrase_en_pairs(tasks, sources):
    task = tasks["paraphrase-en"]
    bible = {t: sources["bible"](t) for t in BIBLE_TRANSLATIONS}
    assert task.kind == "pair-classification" and task.labels == ["not_paraphrase", "paraphrase"]
    assert (len(task.train), len(task.dev), len(task.test)) == (16_000, 2_000, 2_000)
    verses_by_split = []
    for split in task.splits().values():
        kinds = Counter()
        verses = set()
        for example in split:
            kind, verse_a, trans_a, verse_b, trans_b = parse_pair(example)
            kinds[kind] += 1
            verses |= {verse_a, verse_b}
            assert trans_a != trans_b  # positives and negatives alike: two translations
            assert example.text_a == bible[trans_a][verse_a] and example.text_b == bible[trans_b][verse_b]
            if example.label == "paraphrase":
                assert kind == "pos" and verse_a == verse_b
            else:
                assert kind in ("hard", "random") and verse_a != verse_b
                assert word_overlap(bible["kjv"][verse_a], bible["kjv"][verse_b]) < MAX_NEGATIVE_OVERLAP
                if kind == "hard":  # the next or previous verse of the same chapter
                    assert abs(verse_a - verse_b) == 1 and verse_a // 1000 == verse_b // 1000
        assert kinds["pos"] == len(split) // 2  # balanced 50/50
        assert abs(kinds["hard"] - kinds["random"]) <= 0.05 * len(split)
        verses_by_split.append(verses)
    train, dev, test = verses_by_split
    assert not train & dev and not train & test and not dev & test  # split by verse (by chapter)
    chapters = [{v // 1000 for v in verses} for verses in verses_by_split]
    assert not chapters[0] & chapters[2]


def test_paraphrase_en_options(sources):
    small = task_data.paraphrase_en(n_pairs=1_000, translations=("kjv", "web"), hard_fraction=1.0, seed=3)
    assert (len(small.train), len(small.dev), len(small.test)) == (800, 100, 100)
    kinds = Counter(parse_pair(e)[0] for e in small.train)
    assert kinds["pos"] == 400 and kinds["hard"] >= 380  # a few verses have no usable neighbour
    assert {parse_pair(e)[2] for e in small.train} == {"kjv", "web"}
    with pytest.raises(ValueError, match="left out"):
        task_data.paraphrase_en(translations=("kjv", "bbe"))
    with pytest.raises(ValueError, match="Ask for fewer"):
        task_data.paraphrase_en(n_pairs=40_000)


# ----------------------------------------------------------------------------------------
# Cloze QA
# ----------------------------------------------------------------------------------------


def test_cloze_candidates():
    sentence = ("In 1840, Pierre-Joseph Proudhon wrote that Schopenhauer's view of the Bank of England "
                "was 3.5 times off.")
    answers = [sentence[start:end] for start, end in cloze_candidates(sentence)]
    assert answers == ["1840", "Pierre-Joseph Proudhon", "Schopenhauer", "Bank of England", "3.5"]
    sentence = "Paris is in France and France is in Europe."
    start = sentence.index("Europe")
    assert cloze_candidates(sentence) == [(start, start + 6)]  # not Paris (first word), not France (twice)


def test_qa_cloze_en(tasks):
    task = tasks["qa-cloze-en"]
    assert task.kind == "qa" and task.labels == [] and "not SQuAD" in task.description
    sizes = len(task.train), len(task.dev), len(task.test)
    assert 4_500 <= sizes[0] <= 5_500 and min(sizes[1:]) >= 400
    for split in task.splits().values():
        for example in split:
            (answer,) = example.answers
            start, text = answer["answer_start"], answer["text"]
            assert example.context[start : start + len(text)] == text
            assert example.question.count(BLANK) == 1 and "[MASK]" not in example.question
            # the blanked sentence, filled in, is the context's sentence at answer_start
            before, after = example.question.split(BLANK)
            assert example.context[start - len(before) : start + len(text) + len(after)] == before + text + after
    titles = [{example.title for example in split} for split in task.splits().values()]
    assert sum(map(len, titles)) == len(set.union(*titles))  # split by article
    assert max(Counter(example.title for example in task.train).values()) <= 100


# ----------------------------------------------------------------------------------------
# load_task
# ----------------------------------------------------------------------------------------


def test_load_task_embedded_path_and_unknown(tasks, tmp_path):
    task = load_task("ner-en", max_train=100, max_eval=20)
    assert (len(task.train), len(task.dev), len(task.test)) == (100, 20, 20)
    assert {e.id for e in task.train} <= {e.id for e in tasks["ner-en"].train}
    assert ids(load_task("ner-en", seed=4)) != ids(tasks["ner-en"])
    (tmp_path / "train.tsv").write_text("sentence\tlabel\ngood\t1\nbad\t0\n")
    assert [e.label for e in load_task(tmp_path).train] == ["positive", "negative"]
    with pytest.raises(ValueError, match="Unknown task 'sst3'.*sentiment-zh.*squad"):
        load_task("sst3")
    with pytest.raises(TypeError, match="embedded tasks only"):
        load_task(tmp_path, n_pairs=10)


def test_load_task_hugging_face(monkeypatch):
    datasets = pytest.importorskip("datasets")
    calls = []

    def fake_load_dataset(repository, config=None):
        calls.append((repository, config))
        split = datasets.Dataset.from_dict({"sentence": ["good", "bad"], "label": [1, 0], "idx": [0, 1]})
        return datasets.DatasetDict({"train": split, "validation": split})

    monkeypatch.setattr(datasets, "load_dataset", fake_load_dataset)
    task = load_task("sst2")
    assert calls == [("nyu-mll/glue", "sst2")]
    assert task.labels == ["negative", "positive"] and [e.label for e in task.dev] == ["positive", "negative"]

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach the Hugging Face Hub")

    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(RuntimeError, match=r"(?s)rajpurkar/squad.*reach the Hugging Face Hub.*--task PATH"):
        load_task("squad")


def test_an_embedded_task_is_built_once_and_each_caller_gets_its_own_lists():
    first, second = load_task("ner-en"), load_task("ner-en")
    assert first is not second and first.train is not second.train
    assert first.train == second.train and first.description == second.description
    first.train.clear()  # a caller changing its copy ...
    assert load_task("ner-en").train == second.train and second.train  # ... changes no one else's
    assert load_task("ner-en", seed=1).description != second.description  # another seed, another split
