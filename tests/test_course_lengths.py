"""benchmarks/course_lengths.py: both lengths read the same masked tokens (a paired comparison),
its clustered standard error, and the script end to end on a small run of each packing."""

import json
import math
import sys
from pathlib import Path

import pytest
import torch

from bertedu.data.corpora import load_corpus
from bertedu.data.tokenizer import load_vocab_tokenizer
from bertedu.model.constants import IGNORE_INDEX
from bertedu.pretrained import masked_lm_vocab_path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "benchmarks"))  # as `python benchmarks/course_lengths.py` finds its neighbours
import course_lengths  # noqa: E402


def test_every_length_reads_the_same_masked_tokens_in_the_same_corrupted_text():
    tokenizer = load_vocab_tokenizer(masked_lm_vocab_path("course-en"), impl="fast")
    documents = list(load_corpus("wiki-en"))[:3]
    corrupted = course_lengths.corrupted_documents(documents, tokenizer, seed=0)
    assert len(corrupted) == 3
    selected = torch.cat([labels for _, labels in corrupted]) != IGNORE_INDEX
    assert 0.12 < selected.double().mean() < 0.18  # about 15% of the pieces
    by_length = {}
    for length in (64, 128):
        runs = course_lengths.runs_of(corrupted, tokenizer, length)
        assert max(len(ids) for ids, _ in runs) == length
        assert all(ids[0] == tokenizer.cls_token_id and ids[-1] == tokenizer.sep_token_id for ids, _ in runs)
        assert all(labels[0] == labels[-1] == IGNORE_INDEX for _, labels in runs)
        by_length[length] = (torch.cat([ids[1:-1] for ids, _ in runs]), torch.cat([labels[1:-1] for _, labels in runs]))
    assert torch.equal(by_length[64][0], by_length[128][0]) and torch.equal(by_length[64][1], by_length[128][1])
    assert torch.equal(by_length[64][0], torch.cat([ids for ids, _ in corrupted]))
    again = course_lengths.corrupted_documents(documents, tokenizer, seed=0)
    other = course_lengths.corrupted_documents(documents, tokenizer, seed=1)
    assert all(torch.equal(a[1], b[1]) for a, b in zip(corrupted, again))  # a seed is one draw
    assert not all(torch.equal(a[1], b[1]) for a, b in zip(corrupted, other))


def test_clustered_standard_error():
    values = torch.tensor([1.0, 0.0, 1.0, 1.0, 0.0, 1.0])
    mean, se = course_lengths.clustered_mean_se(values, torch.arange(6))  # one value per cluster
    assert mean == pytest.approx(4 / 6)
    assert se == pytest.approx(math.sqrt(((values - 4 / 6) ** 2).sum()) / 6)
    # the same three values counted twice: twice the tokens, no more information, the same error
    doubled, clusters = torch.cat([values[:3], values[:3]]), torch.tensor([0, 1, 2, 0, 1, 2])
    mean3, se3 = course_lengths.clustered_mean_se(values[:3], torch.arange(3))
    assert course_lengths.clustered_mean_se(doubled, clusters) == pytest.approx((mean3, se3))


@pytest.mark.slow  # a pretraining run each (vocabulary included): about ten seconds
@pytest.mark.parametrize("packing", ["pairs", "documents"])
def test_script_end_to_end(tmp_path, monkeypatch, capsys, packing):
    """A two-step run of each packing, measured at 32 and 48 tokens with two mask seeds: the record
    holds both lengths over the same tokens, the paired difference and the sentence-pair accuracy
    (for a documents run too, whose own packing makes no pairs)."""
    import runpy

    from bertedu.cli import main
    from bertedu.data.documents import split_documents
    from bertedu.training.pretrain import document_data, load_pretrained, run_config

    run = tmp_path / "run"
    assert main(["pretrain", "--preset", "tiny", "--steps", "2", "--batch-size", "4", "--corpus", "wiki-en",
                 "--max-documents", "20", "--vocab-size", "600", "--no-progress", "--max-seq-length", "48",
                 "--no-nsp", "--packing", packing, "--max-eval-examples", "16", "--seed", "3", "--out", str(run)]) == 0
    # measured on what the run held out: a documents run splits with a fixed seed, a pairs run with its --seed
    cfg = run_config(run)
    held_out = (document_data(cfg, load_corpus("wiki-en"), load_pretrained(run)[1])[1] if packing == "documents"
                else split_documents(list(load_corpus("wiki-en"))[:20], cfg.eval_documents, 3)[1])
    assert course_lengths.held_out_documents(run, 10**6) == held_out
    record = tmp_path / "lengths.json"
    monkeypatch.setattr(sys, "argv", ["course_lengths.py", str(run), "--lengths", "32", "48", "--mask-seeds", "2",
                                      "--label", "small", "--out", str(record)])
    with pytest.raises(SystemExit) as done:
        runpy.run_path(str(REPO / "benchmarks" / "course_lengths.py"), run_name="__main__")
    assert done.value.code == 0 and "paired:" in capsys.readouterr().out
    entry = json.loads(record.read_text())["small"]
    assert entry["mask_seeds"] == 2 and entry["trained_at"] == 48 and entry["documents"] >= 1
    one, two = entry["lengths"]["32"], entry["lengths"]["48"]
    assert one["tokens"] == two["tokens"] == sum(one["tokens_by_position"]) == sum(two["tokens_by_position"]) > 0
    assert len(one["correct_by_position"]) == 32 and len(two["correct_by_position"]) == 48
    assert entry["difference"]["lengths"] == [48, 32]
    assert entry["difference"]["mean"] == pytest.approx(two["accuracy"] - one["accuracy"])
    assert entry["difference"]["se"] > 0
    assert all(0 <= entry["pairs"][n]["accuracy"] <= 1 and entry["pairs"][n]["tokens"] > 0 for n in ("32", "48"))
    assert entry["command"].startswith("python ") and entry["command"].endswith(f"--label small --out {record}")
