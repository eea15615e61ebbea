import os
import shutil

import pytest
import torch

from bertedu.pretrained import minilm_vocab_path
from bertedu.data.tokenizer import load_vocab_tokenizer

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
torch.set_num_threads(min(2, torch.get_num_threads()))


@pytest.fixture(autouse=True)
def _seed():
    torch.manual_seed(0)


_FAILED = pytest.StashKey[bool]()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.failed:
        item.stash[_FAILED] = True
    return report


@pytest.fixture(autouse=True)
def _free_tmp_path(request):
    """Remove a passing test's tmp_path as soon as it ends; a failing test's stays to be looked at.

    Some tests write checkpoints with optimiser state (the BERT-BASE one about 1 GB), and pytest
    otherwise keeps every tmp_path until the session ends: a whole run held 3.3 GB at its end.
    """
    yield
    path = request.node.funcargs.get("tmp_path")
    if path is not None and not request.node.stash.get(_FAILED, False):
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture(scope="session")
def tok():
    """The reference tokenizer over all-MiniLM-L6-v2's uncased vocabulary."""
    return load_vocab_tokenizer(minilm_vocab_path())


@pytest.fixture(scope="session")
def fast_tok():
    """The fast tokenizer over the same vocabulary."""
    return load_vocab_tokenizer(minilm_vocab_path(), impl="fast")


def ragged_batch(vocab_size: int, lengths=(9, 5, 7, 2), type_vocab_size: int = 2, pad_id: int = 0):
    """A padded batch of sequences of the given real lengths, with two segments each."""
    B, T = len(lengths), max(lengths)
    g = torch.Generator().manual_seed(1234)
    input_ids = torch.randint(1, vocab_size, (B, T), generator=g)
    attention_mask = torch.zeros(B, T, dtype=torch.long)
    token_type_ids = torch.zeros(B, T, dtype=torch.long)
    for i, n in enumerate(lengths):
        attention_mask[i, :n] = 1
        token_type_ids[i, n // 2 : n] = min(1, type_vocab_size - 1)
    input_ids[attention_mask == 0] = pad_id
    return input_ids, token_type_ids, attention_mask


def tiny_sentence_task(folder) -> str:
    """A user's sentence task as `bertedu finetune --task FOLDER` reads it: train.tsv and dev.tsv, a header
    (sentence, label), 12 short sentences labelled 0 / 1 in turn. Returns the folder, as a str."""
    from pathlib import Path

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    rows = "".join(f"{text}\t{i % 2}\n" for i, text in enumerate(["a fine film", "dull", "great fun", "bad"] * 3))
    for split in ("train", "dev"):
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + rows, encoding="utf-8")
    return str(folder)

