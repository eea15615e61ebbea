"""The FLOP count of notebook 12 (bertedu/course/flops.py) against PyTorch's FlopCounterMode on
real forwards and backwards of the readable model and of the fast path's rungs."""

import copy
import warnings

import pytest
import torch
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.utils.flop_counter import FlopCounterMode

from bertedu import BertConfig, BertForPreTraining
from bertedu.course import flops
from bertedu.model import fast

LENGTHS, T = [16, 10, 5], 16


@pytest.fixture(scope="module")
def batch():
    g = torch.Generator().manual_seed(0)
    mask = torch.tensor([[1] * t + [0] * (T - t) for t in LENGTHS])  # (B, T), right padding
    ids = torch.randint(5, 1000, (len(LENGTHS), T), generator=g) * mask
    labels = torch.full_like(ids, -100)
    labels[0, 3], labels[1, 2], labels[2, 4] = 7, 9, 11  # M = 3
    return dict(input_ids=ids, attention_mask=mask, token_type_ids=torch.zeros_like(ids), labels=labels,
                next_sentence_label=torch.tensor([0, 1, 0]))


def counted(model, batch, backward=False):
    # SDPA's math backend: its matrix multiplies are ordinary ones, which the counter sees
    with warnings.catch_warnings(), sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        warnings.simplefilter("ignore")
        out = model(**batch)
        if backward:
            out.loss.backward()
    return counter.get_total_flops()


@pytest.mark.parametrize("rung, options, kernel", [
    ("eager", {}, "reference"), ("+ SDPA", {}, "sdpa"), ("+ sparse MLM", dict(sparse_mlm=True), "sdpa"),
    ("+ unpadding", dict(sparse_mlm=True, unpad=True), "sdpa")])
def test_formula_equals_the_counter(batch, rung, options, kernel):
    config = BertConfig.tiny(vocab_size=1000, attn_implementation=kernel, hidden_dropout_prob=0.0,
                             attention_probs_dropout_prob=0.0)
    model = fast.set_fast_path(BertForPreTraining(config), **options)
    table = flops.ladder_flops(config, LENGTHS, T, labelled=3)
    assert counted(model, batch) == sum(table[rung].values())
    assert counted(model, batch, backward=True) == 3 * sum(table[rung].values())  # backward = 2 forwards


def test_unpadding_removes_the_padding_from_the_dense_layers():
    config = BertConfig.tiny(vocab_size=1000)
    padded = flops.forward_flops(config, LENGTHS, T, 3, sparse_mlm=True)
    unpadded = flops.forward_flops(config, LENGTHS, T, 3, sparse_mlm=True, unpad=True)
    assert padded["dense layers"] * sum(LENGTHS) == unpadded["dense layers"] * len(LENGTHS) * T
    assert padded["attention"] == unpadded["attention"]  # padded around attention, as on a CPU
    nested = flops.forward_flops(config, LENGTHS, T, 3, sparse_mlm=True, unpad=True, unpadded_attention=True)
    assert nested["attention"] * len(LENGTHS) * T * T == padded["attention"] * sum(t * t for t in LENGTHS)


def test_rungs_that_remove_no_flops_and_the_shares_of_the_notebook():
    config = BertConfig.tiny()
    table = flops.ladder_flops(config, [128] * 8, 128, labelled=100, unpadded_attention=True)
    assert table["eager"] == table["+ SDPA"] and table["+ unpadding"] == table["+ bf16"] == table["+ compile"]
    assert list(table) == list(flops.RUNG_EFFECTS)
    assert 0.89 < flops.mlm_head_share(BertConfig.tiny(), 128) < 0.91  # the decoder dominates the tiny preset
    assert 0.21 < flops.mlm_head_share(BertConfig.base(), 128) < 0.23  # not BERT-BASE
    assert flops.speed_up_ceiling(table["eager"], table["eager"]) == 1.0
