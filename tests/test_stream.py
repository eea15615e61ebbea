"""Pretraining examples streamed to disk (bertedu.data.stream) and `pretrain --stream`."""

import dataclasses
import itertools
import json
import random

import pytest
import torch

from bertedu.data import PretrainingDataset, create_pretraining_examples
from bertedu.data.corpora import peoples_daily_words, wiki_en
from bertedu.data.pretraining import tokenize_document, tokenize_documents
from bertedu.data.stream import ExampleStore, shards, write_pretraining_examples
from bertedu.training.pretrain import PretrainConfig, is_held_out, pretrain
from bertedu.pretrained import minilm_vocab_path
from bertedu.data.tokenizer import load_vocab_tokenizer


@pytest.fixture(scope="module")
def tokenizer():
    return load_vocab_tokenizer(minilm_vocab_path(), impl="fast")


@pytest.fixture(scope="module")
def documents():
    return list(itertools.islice(wiki_en(), 12))


def as_tuple(e):
    return (e.input_ids, e.token_type_ids, e.special_tokens_mask, e.next_sentence_label, e.word_ids)


def test_one_shard_reproduces_the_in_memory_examples(tokenizer, documents, tmp_path):
    store = write_pretraining_examples(documents, tokenizer, tmp_path / "ex", 64, seed=3, shard_documents=100)
    tokenized = [tokenize_document(d, tokenizer) for d in documents]
    expected = create_pretraining_examples(tokenized, 64, 0.1, 0.5, random.Random(3), vocab=tokenizer.vocab)
    assert len(store) == len(expected) > 100
    assert [as_tuple(store[i]) for i in range(len(store))] == [as_tuple(e) for e in expected]
    assert store.meta["shards"] == 1 and store.has_word_ids


def test_documents_tokenized_in_one_batch_are_the_documents_tokenized_one_by_one(tokenizer, documents):
    words = [["北京", "是", "首都"], ["我们", "去", "长城"]]  # a corpus's own word segmentation
    mixed = [*documents, [*documents[0][:2], words[0], "one more sentence ."], [words[1]]]
    one_by_one = [tokenize_document(d, tokenizer) for d in mixed]
    assert tokenize_documents(mixed, tokenizer) == tokenize_documents(mixed, tokenizer, chunk=7) == one_by_one
    with pytest.raises(TypeError, match="Document 7 is a string"):
        tokenize_documents([["a ."], "not a list"], tokenizer, first_index=6)


def test_shards_read_the_stream_lazily_and_never_leave_a_lone_document():
    pulled = []

    def stream(n):  # counts the documents read so far
        for i in range(n):
            pulled.append(i)
            yield [f"sentence {i}"]

    groups = shards(stream(1000), 10)
    first = next(groups)
    assert len(first) == 10 and len(pulled) == 20  # one shard, and one read ahead
    assert [len(g) for g in shards(stream(12), 5)] == [5, 5, 2]
    assert [len(g) for g in shards(stream(11), 5)] == [5, 6]  # NotNext needs a second document
    with pytest.raises(ValueError, match="at least 2"):
        next(shards(stream(3), 1))


def test_a_store_of_many_shards_masks_like_a_list(tokenizer, documents, tmp_path):
    store = write_pretraining_examples(iter(documents), tokenizer, tmp_path / "ex", 64, seed=0, shard_documents=4)
    assert store.meta["shards"] == 3 and store.meta["documents"] == 12
    reopened = ExampleStore(tmp_path / "ex")
    kwargs = dict(mask_token_id=tokenizer.mask_token_id, vocab_size=tokenizer.vocab_size,
                  special_ids=sorted(tokenizer.special_ids), whole_word=True, seed=5)
    on_disk = PretrainingDataset(reopened, **kwargs)
    in_memory = PretrainingDataset([reopened[i] for i in range(len(reopened))], **kwargs)
    assert on_disk.examples is reopened  # not copied into memory
    on_disk.set_epoch(2)
    in_memory.set_epoch(2)
    for i in (0, 7, len(on_disk) - 1):
        for key, value in on_disk[i].items():
            torch.testing.assert_close(value, in_memory[i][key])
    # the NSP labels are balanced across shards, and the sentences are the corpus's
    labels = [reopened[i].next_sentence_label for i in range(len(reopened))]
    assert 0.3 < sum(labels) / len(labels) < 0.7
    assert "[CLS]" == tokenizer.convert_ids_to_tokens([reopened[0].input_ids[0]])[0]


def test_chinese_word_boundaries_survive_the_disk(tmp_path):
    vocab = sorted({ch for doc in itertools.islice(peoples_daily_words(), 6) for s in doc for w, _ in s for ch in w})
    path = tmp_path / "vocab.txt"
    path.write_text("\n".join(["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *vocab]) + "\n", encoding="utf-8")
    tok = load_vocab_tokenizer(path, impl="fast")
    docs = [[[w for w, _ in s] for s in doc] for doc in itertools.islice(peoples_daily_words(), 6)]
    store = write_pretraining_examples(docs, tok, tmp_path / "ex", 48, seed=1, shard_documents=3)
    tokenized = [tokenize_document(d, tok) for d in docs]
    rng = random.Random(1)
    expected = [e for part in (tokenized[:3], tokenized[3:])
                for e in create_pretraining_examples(part, 48, 0.1, 0.5, rng, vocab=tok.vocab)]
    assert [as_tuple(store[i]) for i in range(len(store))] == [as_tuple(e) for e in expected]
    assert any(len({w for w in e.word_ids if w >= 0}) < sum(1 for w in e.word_ids if w >= 0) for e in expected)


def test_clear_errors_for_existing_unfinished_and_mismatched_stores(tokenizer, documents, tmp_path):
    store = write_pretraining_examples(documents[:4], tokenizer, tmp_path / "ex", 64)
    with pytest.raises(FileExistsError, match="ExampleStore"):
        write_pretraining_examples(documents[:4], tokenizer, tmp_path / "ex", 64)
    with pytest.raises(ValueError, match="max_seq_length=64"):
        store.check(tokenizer, 128)
    other = tmp_path / "other.txt"
    other.write_text("[PAD]\n[UNK]\n[CLS]\n[SEP]\n[MASK]\nthe\n", encoding="utf-8")
    with pytest.raises(ValueError, match="another vocabulary"):
        store.check(load_vocab_tokenizer(other), 64)
    (tmp_path / "half").mkdir()
    with pytest.raises(FileNotFoundError, match="no finished example store"):
        ExampleStore(tmp_path / "half")
    with pytest.raises(IndexError):
        store[len(store)]


def test_held_out_documents_are_a_stable_hash_of_their_position():
    chosen = [i for i in range(20000) if is_held_out(i, 0.05, seed=0)]
    assert 0.045 < len(chosen) / 20000 < 0.055
    assert chosen == [i for i in range(20000) if is_held_out(i, 0.05, seed=0)]
    assert chosen != [i for i in range(20000) if is_held_out(i, 0.05, seed=1)]


@pytest.mark.slow
def test_pretrain_stream_trains_from_the_store_and_resumes(tmp_path):
    cfg = PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=40, vocab_size=1500, steps=3,
                         batch_size=4, max_seq_length=64, stream=True, shard_documents=8,
                         eval_documents=0.2, max_eval_examples=16, out=str(tmp_path), progress=False)
    result = pretrain(cfg)
    assert result.step == 3
    meta = json.loads((tmp_path / "examples" / "meta.json").read_text())
    assert meta["shards"] >= 3 and 20 < meta["documents"] < 40  # some documents were held out
    stamp = (tmp_path / "examples" / "input_ids.bin").stat().st_mtime_ns
    resumed = pretrain(dataclasses.replace(cfg, steps=5), resume=True)
    assert resumed.step == 5
    assert (tmp_path / "examples" / "input_ids.bin").stat().st_mtime_ns == stamp  # reused, not rebuilt


@pytest.mark.slow
def test_prepare_only_writes_the_data_once_and_the_run_trains_from_it(tmp_path, monkeypatch, capsys):
    from safetensors.torch import load_file

    from bertedu.cli import main
    from bertedu.errors import SettingError
    from bertedu.training.checkpoint import latest_checkpoint

    flags = ["pretrain", "--preset", "tiny", "--corpus", "wiki-en", "--max-documents", "40", "--vocab-size", "1500",
             "--steps", "3", "--batch-size", "4", "--max-seq-length", "64", "--stream", "--shard-documents", "8",
             "--eval-documents", "0.2", "--max-eval-examples", "16", "--no-progress"]
    prepared, plain = tmp_path / "prepared", tmp_path / "plain"
    assert main([*flags, "--out", str(prepared), "--prepare-only"]) == 0
    assert json.loads(capsys.readouterr().out)["stopped_by"] == "prepare_only"
    assert latest_checkpoint(prepared) is None and (prepared / "vocab.txt").is_file()
    stamp = (prepared / "examples" / "input_ids.bin").stat().st_mtime_ns
    assert main([*flags, "--out", str(prepared)]) == 0  # what torchrun's processes run next
    assert (prepared / "examples" / "input_ids.bin").stat().st_mtime_ns == stamp  # read, not rebuilt
    assert main([*flags, "--out", str(plain)]) == 0  # the same run without the separate step
    weights = [load_file(str(folder / "checkpoint-3" / "model.safetensors")) for folder in (prepared, plain)]
    assert all(torch.equal(weights[0][k], weights[1][k]) for k in weights[1])
    monkeypatch.setenv("WORLD_SIZE", "2")
    cfg = PretrainConfig(preset="tiny", steps=1, out=str(tmp_path / "other"))
    with pytest.raises(SettingError, match="without torchrun"):
        pretrain(cfg, prepare_only=True)


def test_under_torchrun_other_processes_wait_for_process_zeros_store(tokenizer, documents, tmp_path, monkeypatch):
    import os
    import threading

    from bertedu.data import load_corpus
    from bertedu.training.pretrain import streamed_dataset

    monkeypatch.setenv("RANK", "1")
    cfg = PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=40, steps=1, max_seq_length=64,
                         stream=True, eval_documents=0.2, out=str(tmp_path), progress=False)
    store = write_pretraining_examples(documents, tokenizer, tmp_path / "aside", 64)  # process 0's, made aside
    mover = threading.Timer(0.5, lambda: os.replace(tmp_path / "aside", tmp_path / "examples"))
    mover.start()
    dataset, held_out = streamed_dataset(cfg, load_corpus("wiki-en"), tokenizer, tmp_path)
    mover.join()
    assert len(dataset) == len(store) and len(held_out) >= 2  # read process 0's store, did not write one


@pytest.mark.slow
def test_the_data_path_benchmark_runs_and_records_its_command(tmp_path):
    import runpy
    from pathlib import Path

    bench = runpy.run_path(str(Path(__file__).resolve().parents[1] / "benchmarks" / "data_path.py"))
    out = tmp_path / "data_path.json"
    record = bench["main"](["--lengths", "128", "--batches", "2", "--repeats", "1", "--batch-size", "8",
                            "--json", str(out)])
    assert json.loads(out.read_text())["command"].startswith("python benchmarks/data_path.py --lengths 128")
    for path in ("per-example", "batch"):
        result = record["lengths"][128][path]
        assert 0 < result["real_tokens_per_batch"] <= 8 * 128 and result["median"] > 0
