"""Masking a whole micro-batch at once (issue 52 item 3): `UnmaskedPairs` and `bertedu pretrain --batch-masking`."""

import itertools

import pytest
import torch

from bertedu.data import build_pretraining_dataset
from bertedu.data.corpora import wiki_en
from bertedu.data.pretraining import UnmaskedPairs
from bertedu.model.constants import IGNORE_INDEX


@pytest.fixture(scope="module")
def tokenizer(fast_tok):
    return fast_tok  # conftest's fast tokenizer over MiniLM's vocabulary


@pytest.fixture(scope="module")
def documents():
    return list(itertools.islice(wiki_en(), 6))


def generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def test_a_batch_is_a_pure_function_of_its_examples_and_generator(tokenizer, documents):
    view = UnmaskedPairs(build_pretraining_dataset(documents, tokenizer, max_seq_length=64, seed=0))
    examples = [view[i] for i in range(16)]
    first, again, other = (view.collate(examples, generator(s)) for s in (5, 5, 6))
    assert all(torch.equal(first[k], again[k]) for k in first)
    assert not torch.equal(first["labels"], other["labels"])
    assert set(first) == {"input_ids", "token_type_ids", "attention_mask", "labels", "next_sentence_label"}
    assert first["input_ids"].shape == first["labels"].shape == (16, max(len(e.input_ids) for e in examples))


def test_batch_masks_follow_bert_rules(tokenizer, documents):
    view = UnmaskedPairs(build_pretraining_dataset(documents, tokenizer, max_seq_length=64, seed=0))
    selected = candidates = as_mask = 0
    for b in range(20):
        examples = [view[(b * 16 + i) % len(view)] for i in range(16)]
        batch = view.collate(examples, generator(b))
        original = torch.full_like(batch["input_ids"], tokenizer.pad_token_id)
        for row, e in enumerate(examples):
            original[row, : len(e.input_ids)] = torch.tensor(e.input_ids)
        special = torch.tensor([[i in tokenizer.special_ids for i in row] for row in original.tolist()])
        chosen = batch["labels"] != IGNORE_INDEX
        assert not (chosen & special).any()  # [CLS], [SEP] and padding are never selected
        assert torch.equal(batch["labels"][chosen], original[chosen])  # the label is the original piece
        unchosen = ~chosen
        assert torch.equal(batch["input_ids"][unchosen], original[unchosen])  # nothing else changes
        selected, candidates = selected + int(chosen.sum()), candidates + int((~special).sum())
        as_mask += int((batch["input_ids"][chosen] == tokenizer.mask_token_id).sum())
    assert 0.13 < selected / candidates < 0.17  # 15% of the real pieces
    assert 0.75 < as_mask / selected < 0.85  # 80% of them shown as [MASK]


def test_static_masking_stays_per_example(tokenizer, documents):
    static = build_pretraining_dataset(documents, tokenizer, max_seq_length=64, seed=0, masking="static", dupe_factor=2)
    with pytest.raises(ValueError, match="static masking is per example"):
        UnmaskedPairs(static)


# ---- bertedu pretrain --batch-masking ------------------------------------------------------------
def run(folder, steps: int = 4, stop_at_step=None, resume: bool = False, **settings):
    from bertedu.training.pretrain import PretrainConfig, pretrain

    cfg = PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=12, vocab_size=1000, max_seq_length=64,
                         batch_size=4, steps=steps, max_eval_examples=8, log_every=1, out=str(folder), progress=False,
                         **settings)
    result = pretrain(cfg, resume=resume, stop_at_step=stop_at_step)
    return result, final_weights(folder, result.step)


def final_weights(folder, step: int) -> dict:
    from safetensors.torch import load_file

    return load_file(str(folder / f"checkpoint-{step}" / "model.safetensors"))


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_batch_masked_runs_repeat_bit_for_bit_and_resume_exactly(tmp_path):
    first, weights = run(tmp_path / "first", batch_masking=True)
    _, again = run(tmp_path / "again", batch_masking=True)
    assert same(weights, again)
    run(tmp_path / "parts", batch_masking=True, stop_at_step=2)
    resumed, parts = run(tmp_path / "parts", batch_masking=True, resume=True)
    assert resumed.step == 4 and same(weights, parts)
    assert [r["loss"] for r in resumed.records if "loss" in r] == [r["loss"] for r in first.records if "loss" in r]


def test_the_cpu_default_keeps_its_per_example_masks(tmp_path):
    default, weights = run(tmp_path / "default")
    _, per_example = run(tmp_path / "per-example", batch_masking=False)
    by_batch, batch_weights = run(tmp_path / "by-batch", batch_masking=True)
    assert same(weights, per_example)  # the default on the CPU: every earlier run and record unchanged
    assert not same(weights, batch_weights)  # other masks, so other updates
    first_loss = lambda result: next(r["loss"] for r in result.records if "loss" in r)  # noqa: E731
    assert first_loss(default) != first_loss(by_batch)  # the first step already sees other masks


def test_cuda_runs_mask_by_batch_unless_told_otherwise(monkeypatch):
    import bertedu.training.pretrain as pretrain_module

    monkeypatch.setattr(pretrain_module, "resolve_device", lambda *args, **kwargs: torch.device("cuda"))
    cfg = lambda **kw: pretrain_module.PretrainConfig(steps=1, out="unused", **kw)  # noqa: E731
    assert pretrain_module.uses_batch_masking(cfg())
    assert not pretrain_module.uses_batch_masking(cfg(batch_masking=False))
    assert not pretrain_module.uses_batch_masking(cfg(masking="static"))  # masks fixed per example ahead
    assert not pretrain_module.uses_batch_masking(cfg(packing="documents", nsp=False))  # its own batch masking


def test_batch_masking_refuses_static_masks():
    from bertedu.training.pretrain import PretrainConfig

    with pytest.raises(ValueError, match="--masking static"):
        PretrainConfig(steps=1, out="unused", masking="static", batch_masking=True)
