"""The files people have: their own tables, CoLA's headerless TSV, and which format a file is in.

Introduced with `bertedu.data.files.load_path` (the fine-tuning notebooks). Beside the
canonical formats of formats.py this reads

    read_table(path, ...)    a user's CSV, TSV or JSON Lines file with named columns: the
                             text (and for pairs the second text) and the label, by the
                             names given (--text-column, --text-pair-column,
                             --label-column) or by the common names below
    read_cola_tsv(path)      CoLA as GLUE ships it: no header; source, label (0/1), the
                             original author's mark, sentence

and `detect_format(path)` decides which reader a file is for, from its suffix and its
first lines. A file in no known format raises `DataFormatError` listing every format
tried and why each one rejected the file.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Sequence
from pathlib import Path

from .formats import (
    _TAG,
    COLA_LABELS,
    GLUE_FILE,
    GLUE_SCHEMAS,
    MNLI_LABELS,
    DataFormatError,
    TextClassificationExample,
    glue_schema,
    is_glue_header,
)

# Column names looked for when none is given (compared case-insensitively), in this order.
TEXT_COLUMNS = ("sentence", "text", "review", "sentence1", "text_a", "premise", "question1", "content")
PAIR_COLUMNS = ("sentence2", "text_b", "text_pair", "hypothesis", "question2")
LABEL_COLUMNS = ("label", "labels", "gold_label", "sentiment", "class", "category")
ID_COLUMNS = ("id", "idx", "index", "guid")
SNIFF_LINES = 50  # lines looked at to decide a file's format

# The flags of `bertedu finetune` that name the columns (keyword arguments of read_table).
COLUMN_OPTIONS = ("text_column", "text_pair_column", "label_column")


def read_text(path: Path) -> str:
    """The file as text (a byte-order mark dropped); DataFormatError if it is not UTF-8."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as err:
        raise not_utf8(path, err) from None


def not_utf8(path: Path, err: UnicodeDecodeError) -> DataFormatError:
    """The error for a file that did not decode: a binary file is called one; text in another
    encoding is told to be saved as UTF-8."""
    from .corpora import is_binary

    with open(path, "rb") as handle:
        if is_binary(handle.read(8192)):
            return DataFormatError(path, None, "a binary file, not text: give a UTF-8 text file (.tsv, .csv, .jsonl, "
                                               ".json or CoNLL)")
    return DataFormatError(path, None, f"not UTF-8 text (byte {err.start}: {err.reason}); save it as UTF-8.")


def _first_lines(path: Path, n: int = SNIFF_LINES) -> list[str]:
    """Up to n non-blank lines from the start of the file (for deciding its format)."""
    lines = []
    try:
        with open(path, encoding="utf-8-sig", newline="") as handle:
            for line in handle:
                if line.strip():
                    lines.append(line.rstrip("\r\n"))
                if len(lines) >= n:
                    break
    except UnicodeDecodeError as err:
        raise not_utf8(path, err) from None
    return lines


class ColumnNotFound(DataFormatError):
    """A column the user named (--text-column, ...) is not in the file."""


# ---- which format -------------------------------------------------------------------------
def _pick(columns: Sequence[str], given: str | None, common: Sequence[str], what: str, flag: str,
          path: Path) -> str | None:
    """The column named `given` (must exist), else the first common name present, else None."""
    lower = {c.strip().lower(): c for c in columns}
    if given is not None:
        if given.lower() not in lower:
            raise ColumnNotFound(path, 1, f"no {what} column {given!r} ({flag}); the columns are {list(columns)}.")
        return lower[given.lower()]
    return next((lower[name] for name in common if name in lower), None)


def _table_columns(path: Path, columns: Sequence[str], options: dict) -> tuple[str, str | None, str | None]:
    """(text, pair or None, label or None) columns of a table's header."""
    text = _pick(columns, options.get("text_column"), TEXT_COLUMNS, "text", "--text-column", path)
    if text is None:
        raise DataFormatError(path, 1, f"no text column among {list(columns)[:8]} (looked for "
                              f"{', '.join(TEXT_COLUMNS)}; name it with --text-column).")
    pair = _pick(columns, options.get("text_pair_column"), PAIR_COLUMNS, "second text", "--text-pair-column", path)
    label = _pick(columns, options.get("label_column"), LABEL_COLUMNS, "label", "--label-column", path)
    return text, pair, label


def _delimiter(path: Path, header: str) -> str:
    if path.suffix.lower() == ".csv":
        return ","
    if path.suffix.lower() == ".tsv" or "\t" in header:
        return "\t"
    return ","


def _sniff_squad(path: Path, lines: list[str], options: dict) -> None:
    if path.suffix.lower() != ".json":
        raise DataFormatError(path, None, "not a .json file")
    if not lines or not lines[0].lstrip().startswith("{"):
        raise DataFormatError(path, 1, "does not start with a JSON object '{'")
    if len(lines) > 1 and _is_json_object(lines[0]) and _is_json_object(lines[1]):
        raise DataFormatError(path, 1, "one JSON object per line: JSON Lines, not one SQuAD document")


def _is_json_object(line: str) -> bool:
    try:
        return isinstance(json.loads(line), dict)
    except ValueError:
        return False


def _sniff_glue(path: Path, lines: list[str], options: dict) -> None:
    """GLUE's only when it is GLUE's: one of its file names, its header column for column, and
    its labels (0/1 for SST-2 and MRPC; MNLI's three words) in the lines read."""
    if not lines:
        raise DataFormatError(path, None, "empty")
    header = lines[0].split("\t")
    if not is_glue_header(header):
        raise DataFormatError(path, 1, f"the first line {lines[0][:60]!r} is not a GLUE header (SST-2: sentence, "
                              "label; MRPC: Quality, #1 ID, #2 ID, #1 String, #2 String; MNLI: index, promptID, "
                              "pairID, genre, ... sentence1, sentence2, ... gold_label)")
    if not GLUE_FILE.match(path.name):
        raise DataFormatError(path, None, f"not one of GLUE's file names ({path.name}; GLUE's are train.tsv, "
                              "dev.tsv, test.tsv, dev_matched.tsv, ...)")
    task = glue_schema(header)
    label_column = GLUE_SCHEMAS[task][2]
    if label_column not in header:
        return  # a test file: no labels
    allowed = {"0", "1"} if task != "mnli" else {*MNLI_LABELS, "-"}
    at = header.index(label_column)
    for n, line in enumerate(lines[1:], 2):
        row = line.split("\t")
        if len(row) == len(header) and row[at] not in allowed:
            raise DataFormatError(path, n, f"label {row[at][:20]!r} is not one of GLUE's ({', '.join(sorted(allowed))})")


def _sniff_cola(path: Path, lines: list[str], options: dict) -> None:
    if not lines:
        raise DataFormatError(path, None, "empty")
    for n, line in enumerate(lines, 1):
        row = line.split("\t")
        if len(row) != 4:
            raise DataFormatError(path, n, f"{len(row)} tab-separated columns; CoLA has 4 (source, label 0/1, "
                                  "original mark, sentence) and no header")
        if row[1] not in ("0", "1"):
            raise DataFormatError(path, n, f"second column {row[1][:20]!r} is not CoLA's label 0 or 1")


def _sniff_table(path: Path, lines: list[str], options: dict) -> None:
    if path.suffix.lower() in (".jsonl", ".json"):
        raise DataFormatError(path, None, "a JSON file")
    if not lines:
        raise DataFormatError(path, None, "empty")
    header = next(csv.reader([lines[0]], delimiter=_delimiter(path, lines[0])))
    _table_columns(path, header, options)


def _sniff_jsonl(path: Path, lines: list[str], options: dict) -> None:
    if not lines:
        raise DataFormatError(path, None, "empty")
    try:
        first = json.loads(lines[0])
    except ValueError:
        raise DataFormatError(path, 1, "the first line is not a JSON object") from None
    if not isinstance(first, dict):
        raise DataFormatError(path, 1, f"the first line is a JSON {type(first).__name__}, not an object")
    _table_columns(path, list(first), options)


def _sniff_conll(path: Path, lines: list[str], options: dict) -> None:
    words = [line for line in lines if not line.startswith("-DOCSTART-")]
    if not words:
        raise DataFormatError(path, None, "no 'word ... tag' lines")
    for n, line in enumerate(words, 1):
        columns = line.split("\t") if "\t" in line else line.split()
        if len(columns) < 2:
            raise DataFormatError(path, n, f"one column ({line[:40]!r}), a CoNLL line is 'word ... tag'")
        if not _TAG.match(columns[-1].strip()):
            raise DataFormatError(path, n, f"last column {columns[-1][:20]!r} is not a BIO tag (O, B-X, I-X)")


# name -> (what it is, sniffer); tried in this order (a named-column table first when
# columns are named: the user has said what the file is)
_FORMATS = {
    "squad": ("SQuAD JSON", _sniff_squad),
    "glue": ("GLUE TSV with its header", _sniff_glue),
    "cola": ("CoLA TSV (no header)", _sniff_cola),
    "table": ("CSV/TSV with named columns", _sniff_table),
    "jsonl": ("JSON Lines with named fields", _sniff_jsonl),
    "conll": ("CoNLL columns (word ... BIO tag)", _sniff_conll),
}


def detect_format(path: str | os.PathLike, **options) -> str:
    """The format of a data file: "squad", "glue", "cola", "table", "jsonl" or "conll",
    decided from its suffix and first lines. `options`: the column names (COLUMN_OPTIONS).
    Raises DataFormatError listing each format tried and why it does not fit."""
    path = Path(path)
    lines = _first_lines(path)
    order = list(_FORMATS)
    if any(options.get(k) for k in COLUMN_OPTIONS):
        order = ["table", "jsonl", *(f for f in order if f not in ("table", "jsonl"))]
    reasons = []
    for name in order:
        what, sniff = _FORMATS[name]
        try:
            sniff(path, lines, options)
            return name
        except ColumnNotFound:
            raise  # the user said which column: that it is missing is the error
        except DataFormatError as err:
            where = f"line {err.line}: " if err.line else ""
            reasons.append(f"{what}: {where}{err.message.rstrip('.')}")
    raise DataFormatError(path, None, "in no known format. Tried " + "; ".join(reasons) + ".")


# ---- the readers ------------------------------------------------------------------------------
def read_table(path: str | os.PathLike, text_column: str | None = None, text_pair_column: str | None = None,
               label_column: str | None = None) -> tuple[str, list[TextClassificationExample]]:
    """A CSV, TSV or JSON Lines file with named columns -> ("table-single" or "table-pair",
    examples). Columns by the names given or the common ones (TEXT_COLUMNS, PAIR_COLUMNS,
    LABEL_COLUMNS, case-insensitive); a missing or empty label is None (unlabelled). Labels
    are kept as text ("1", "pos")."""
    path = Path(path)
    options = {"text_column": text_column, "text_pair_column": text_pair_column, "label_column": label_column}
    text = read_text(path)
    if path.suffix.lower() in (".jsonl", ".json"):
        rows, header = _json_lines(path, text)
    else:
        first = text.split("\n", 1)[0]
        try:
            records = list(csv.reader(io.StringIO(text, newline=""), delimiter=_delimiter(path, first)))
        except csv.Error as err:
            raise DataFormatError(path, None, f"not readable as CSV/TSV: {err}.") from None
        records = [(n, r) for n, r in enumerate(records, 1) if any(cell.strip() for cell in r)]
        if not records:
            raise DataFormatError(path, None, "holds no rows.")
        header = records[0][1]
        rows = []
        for n, record in records[1:]:
            if len(record) != len(header):
                raise DataFormatError(path, n, f"{len(record)} columns, but the header has {len(header)} "
                                      f"({', '.join(header)}). A delimiter inside an unquoted text?")
            rows.append((n, dict(zip(header, record))))
    text_col, pair_col, label_col = _table_columns(path, header, options)
    id_col = _pick(header, None, ID_COLUMNS, "id", "", path)
    examples = []
    for n, row in rows:
        values = [row.get(c) for c in (text_col, pair_col) if c]
        if any(not isinstance(v, str) for v in values):
            raise DataFormatError(path, n, f"the text is {values!r}, not a string.")
        label = row.get(label_col) if label_col else None
        if isinstance(label, (dict, list)):
            raise DataFormatError(path, n, f"the label {label!r} is not a single value.")
        label = None if label is None or str(label).strip() == "" else str(label).strip()
        examples.append(TextClassificationExample(values[0], values[1] if pair_col else None, label,
                                                  str(row[id_col]) if id_col and row.get(id_col) is not None
                                                  else f"{path.stem}-{n}"))
    if not examples:
        raise DataFormatError(path, None, "holds no rows after the header.")
    return ("table-pair" if pair_col else "table-single"), examples


def _json_lines(path: Path, text: str) -> tuple[list[tuple[int, dict]], list[str]]:
    rows, header = [], None
    for n, line in enumerate(text.split("\n"), 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            raise DataFormatError(path, n, f"not a JSON object: {err}.") from None
        if not isinstance(row, dict):
            raise DataFormatError(path, n, f"a JSON {type(row).__name__}, not an object.")
        header = header or list(row)
        rows.append((n, row))
    if not rows:
        raise DataFormatError(path, None, "holds no JSON objects.")
    return rows, header


def read_cola_tsv(path: str | os.PathLike) -> list[TextClassificationExample]:
    """CoLA's train.tsv / dev.tsv as GLUE ships them: no header, four tab-separated
    columns (source, label 0/1, the original author's mark, sentence). Labels become
    COLA_LABELS ("unacceptable", "acceptable")."""
    path = Path(path)
    examples = []
    for n, line in enumerate(read_text(path).split("\n"), 1):
        line = line.rstrip("\r")
        if not line.strip():
            continue
        row = line.split("\t")
        if len(row) != 4 or row[1] not in ("0", "1"):
            raise DataFormatError(path, n, "a CoLA row is source<TAB>label 0/1<TAB>mark<TAB>sentence; "
                                  f"got {len(row)} columns: {line[:60]!r}")
        examples.append(TextClassificationExample(row[3], None, COLA_LABELS[int(row[1])], f"{path.stem}-{n}"))
    if not examples:
        raise DataFormatError(path, None, "holds no rows.")
    return examples
