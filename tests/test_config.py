import dataclasses

import pytest
import torch

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.model.config import PRESETS


def count_on_meta(model_cls, config):
    with torch.device("meta"):  # no memory: shapes only
        return sum(p.numel() for p in model_cls(config).parameters())


def test_bert_base_and_large_parameter_counts_match_the_released_models():
    # bert-base-uncased / bert-large-uncased BertModel (with pooler), vocabulary 30,522
    assert count_on_meta(BertModel, BertConfig.base()) == 109_482_240
    assert count_on_meta(BertModel, BertConfig.large()) == 335_141_888


def test_pretraining_heads_add_only_untied_parameters():
    cfg = BertConfig.base()
    D, V = cfg.hidden_size, cfg.vocab_size
    heads = (D * D + D) + 2 * D + V + (2 * D + 2)  # MLM dense, LayerNorm, decoder bias; NSP
    assert count_on_meta(BertForPreTraining, cfg) == 109_482_240 + heads


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets(name):
    cfg = BertConfig.preset(name)
    layers, hidden, heads = PRESETS[name]
    assert (cfg.num_hidden_layers, cfg.hidden_size, cfg.num_attention_heads) == (layers, hidden, heads)
    assert cfg.intermediate_size == 4 * hidden
    assert getattr(BertConfig, name)() == cfg


def test_config_is_frozen_and_replace_makes_variants():
    cfg = BertConfig.tiny()
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.hidden_size = 3
    assert cfg.replace(vocab_size=100).vocab_size == 100
    assert BertConfig.tiny(vocab_size=100).vocab_size == 100


def test_bad_configs_give_clear_errors():
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        BertConfig.preset("huge")
    with pytest.raises(ValueError, match="divisible"):
        BertConfig(hidden_size=100, num_attention_heads=3)
    with pytest.raises(ValueError, match="attn_implementation"):
        BertConfig(attn_implementation="flash9")


def test_from_hf_reads_transformers_config_and_dict():
    transformers = pytest.importorskip("transformers")
    hf = transformers.BertConfig(vocab_size=321, hidden_size=48, num_hidden_layers=3, num_attention_heads=4,
                                 intermediate_size=100, max_position_embeddings=64, hidden_act="gelu_new")
    cfg = BertConfig.from_hf(hf)
    assert (cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers, cfg.num_attention_heads) == (321, 48, 3, 4)
    assert cfg.intermediate_size == 100 and cfg.max_position_embeddings == 64
    assert cfg.hidden_act == "gelu_tanh"
    assert BertConfig.from_hf(hf.to_dict()) == cfg
    assert transformers.BertConfig(**cfg.to_hf_dict()).hidden_act == "gelu_new"
