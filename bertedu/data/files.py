"""Task data on disk: a folder of train/dev/test files, or one file, read into `TaskData`.

Introduced with the fine-tuning notebooks (`bertedu finetune --task PATH`). `load_path`
finds the split files of a folder by name, asks `user_files.detect_format` which format
each file is in, reads it with the reader of that format (`formats` for the canonical
ones, `user_files` for a user's own tables), and assembles one `TaskData`.
"""

from __future__ import annotations

import logging
import os
import random
import re
from pathlib import Path

from ..errors import MissingFileError
from .tokenizer import CJK_RANGES
from .formats import (
    DataFormatError,
    TaskData,
    _read_conll,
    _task_data,
    read_glue_tsv,
    read_squad_json,
)
from .user_files import detect_format, read_cola_tsv, read_table

log = logging.getLogger(__name__)


def _split_role(path: Path) -> str:
    """Which split a file holds, from its name: train.tsv, dev_matched.tsv, eng.testa,
    valid.txt, dev-v1.1.json, msr_paraphrase_test.txt, ..."""
    name = path.name.lower()
    if "mismatched" in name:
        return "dev_mismatched" if ("dev" in name or "valid" in name) else "test_mismatched"
    if "train" in name:
        return "train"
    if "dev" in name or "valid" in name or "testa" in name:
        return "dev"
    if "test" in name:
        return "test"
    return "train"


_DATA_SUFFIXES = ("", ".tsv", ".txt", ".json", ".conll", ".iob", ".train", ".testa", ".testb", ".csv", ".jsonl")
# A split file proper: train.tsv, dev_matched.tsv, test_mismatched.tsv, valid.txt,
# train-v2.0.json, eng.testa, ... Beside these, a download may leave other files whose
# names also say train/dev/test (MRPC: msr_paraphrase_train.txt, dev_ids.tsv): skipped.
_SPLIT_FILE = re.compile(r"^(?:(?:train|dev|test|valid|validation)(?:[_-](?:matched|mismatched|v\d\.\d))?"
                         r"(?:\.(?:tsv|csv|jsonl|json|txt|conll|iob))?|eng\.(?:train|testa|testb))$", re.IGNORECASE)
_SINGLE, _PAIR = ("sst2", "cola", "table-single"), ("mrpc", "mnli", "table-pair")


def _is_data_file(path: Path) -> bool:
    """A train/dev/test file of a canonical format (not a README, a licence or an archive)."""
    name = path.name.lower()
    return (
        path.is_file()
        and not name.startswith(".")
        and path.suffix.lower() in _DATA_SUFFIXES
        and any(word in name for word in ("train", "dev", "valid", "test"))
    )


def _read_file(path: Path, **columns) -> tuple[str, list, bool]:
    """(schema, examples, converted from IOB1); the format found by `detect_format`."""
    form = detect_format(path, **columns)
    if form == "squad":
        return "squad", read_squad_json(path), False
    if form == "glue":
        task, examples = read_glue_tsv(path)
        return task, examples, False
    if form == "cola":
        return "cola", read_cola_tsv(path), False
    if form in ("table", "jsonl"):
        schema, examples = read_table(path, **columns)
        return schema, examples, False
    examples, iob1 = _read_conll(path)
    return "conll2003", examples, iob1


def _is_labelled(schema: str, examples: list) -> bool:
    """False for a classification file without labels (GLUE's test files)."""
    return schema not in (*_SINGLE, *_PAIR) or any(e.label is not None for e in examples)


def _language(examples: list) -> str:
    """"zh" when most characters of the text are CJK (Chinese NER, one character a line), else "en"."""
    text = "".join(" ".join(e.tokens) if hasattr(e, "tokens") else (e.question + e.context if hasattr(e, "question")
                   else e.text_a + (e.text_b or "")) for e in examples[:200])
    letters = [c for c in text if not c.isspace()]
    cjk = sum(any(a <= ord(c) <= b for a, b in CJK_RANGES) for c in letters)
    return "zh" if letters and cjk / len(letters) > 0.5 else "en"


def _split_one_file(path: Path, seed: int, **columns) -> tuple[str, dict, bool]:
    """One file's examples shuffled with random.Random(seed) and cut 80/10/10: (schema, splits, iob1)."""
    schema, examples, iob1 = _read_file(path, **columns)
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    n_dev = n_test = len(examples) // 10
    splits = {
        "train": [examples[i] for i in order[n_dev + n_test :]],
        "dev": [examples[i] for i in order[:n_dev]],
        "test": [examples[i] for i in order[n_dev : n_dev + n_test]],
    }
    return schema, splits, iob1


def _read_folder(path: Path, **columns) -> tuple[str, dict, bool, list[str]]:
    """A folder's train / dev / test files, found by name: (schema, splits, iob1, names of skipped files)."""
    candidates = sorted(p for p in path.iterdir() if _is_data_file(p))
    files = [p for p in candidates if _SPLIT_FILE.match(p.name)] or candidates
    skipped = [p.name for p in candidates if p not in files]
    if skipped:  # one notice: what a download script leaves beside the splits
        log.warning("%s: skipped %s (not train/dev/test files of the task)", path, ", ".join(skipped))
    if not files:
        raise DataFormatError(
            path, None, "No data files: expected train/dev/test files (.tsv, .txt, .json, .conll, "
            "eng.train/eng.testa/eng.testb)."
        )
    splits, schemas, unlabelled, iob1 = {"train": [], "dev": [], "test": []}, set(), set(), False
    for file in files:
        schema, examples, converted = _read_file(file, **columns)
        role = _split_role(file)
        if splits.get(role):
            raise DataFormatError(path, None, f"two {role} files (the second is {file.name}); keep one.")
        splits[role], iob1 = examples, iob1 or converted
        (schemas if _is_labelled(schema, examples) else unlabelled).add(schema)
    if unlabelled and len(schemas) == 1:  # GLUE's test.tsv (index, sentence) beside CoLA's train.tsv
        kind = _SINGLE if next(iter(schemas)) in _SINGLE else _PAIR
        if all(s in kind for s in unlabelled):
            unlabelled = set()
    schemas |= unlabelled
    if len(schemas) > 1:
        raise DataFormatError(path, None, f"the files mix formats ({sorted(schemas)}); keep one task per folder.")
    return schemas.pop(), splits, iob1, skipped


def load_path(path: str | os.PathLike, seed: int = 0, **columns) -> TaskData:
    """A folder or a file in a known format -> `TaskData`.

    A folder: its train / dev / test files, found by name (train.tsv, dev.tsv,
    dev_matched.tsv, test.tsv; eng.train, eng.testa, eng.testb; train.txt, valid.txt,
    test.txt; train-v1.1.json, dev-v2.0.json; train.csv, dev.jsonl), all of one task.
    Other files whose names mention a split (MRPC's msr_paraphrase_train.txt and
    dev_ids.tsv) are skipped, with one notice, when split files proper are there. A test
    file without labels (GLUE's) joins a labelled task of the same kind. A single file is
    split 80/10/10 into train/dev/test with `random.Random(seed)`.

    Formats (user_files.detect_format): SQuAD JSON (v1.1, v2.0), GLUE TSV, CoLA's
    headerless TSV, CSV / TSV / JSON Lines with named columns (`columns`: text_column,
    text_pair_column, label_column, else the common names), CoNLL columns (IOB1 or BIO;
    also one `character tag` a line for Chinese).
    """
    path = Path(path).expanduser()
    if path.is_file():
        schema, splits, iob1 = _split_one_file(path, seed, **columns)
        how = f"split 80/10/10 with seed {seed}"
    elif path.is_dir():
        schema, splits, iob1, skipped = _read_folder(path, **columns)
        how = "splits from the file names" + (f"; skipped {', '.join(skipped)}" if skipped else "")
    else:
        raise MissingFileError(f"No file or folder at {path}.")
    description = f"{schema} format read from {path} ({how}" + ("; IOB1 tags converted to BIO)" if iob1 else ")")
    task = _task_data(path.name, schema, splits, description)
    task.language = _language(task.train or task.dev or task.test)
    return task
