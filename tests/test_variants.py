"""RoBERTa, ALBERT and DistilBERT: their sizes, their pieces, and parity with transformers.

The bar is BERT's (tests/test_interop.py): random weights at odd sizes, LayerNorm and bias
values randomised, a padded batch, MLM (and SOP) logits within 1e-5 in fp32, exact round trips.
"""

import pytest
import torch

from bertedu.family.albert import AlbertConfig, AlbertForPreTraining, AlbertModel
from bertedu.family.distilbert import DistilBertConfig, DistilBertForMaskedLM, DistilBertModel
from bertedu.interop import from_hf, to_hf
from bertedu.family.roberta import RobertaConfig, RobertaForMaskedLM, RobertaModel, create_position_ids

transformers = pytest.importorskip("transformers")


# ---- sizes, counted without allocating a weight ---------------------------------------

@pytest.mark.parametrize("model_class,config,expected", [
    (RobertaModel, RobertaConfig.base(), 124_645_632),
    (RobertaModel, RobertaConfig.large(), 355_359_744),
    (AlbertModel, AlbertConfig.base(), 11_683_584),
    (AlbertModel, AlbertConfig.large(), 17_683_968),
    (DistilBertModel, DistilBertConfig(), 66_362_880),
])
def test_parameter_counts_of_the_published_sizes(model_class, config, expected):
    with torch.device("meta"):
        model = model_class(config)
    assert model.num_parameters() == expected


def test_the_same_sizes_in_transformers():
    """The counts above are transformers' too (so they are the models' real sizes)."""
    with torch.device("meta"):
        for hf, ours in [(transformers.RobertaModel(transformers.RobertaConfig(**RobertaConfig.base().to_hf_dict())),
                          124_645_632),
                         (transformers.AlbertModel(transformers.AlbertConfig(**AlbertConfig.base().to_hf_dict())),
                          11_683_584),
                         (transformers.DistilBertModel(transformers.DistilBertConfig(
                             **DistilBertConfig().to_hf_dict())), 66_362_880)]:
            assert sum(p.numel() for p in hf.parameters()) == ours


# ---- the pieces ------------------------------------------------------------------------

def test_roberta_numbers_positions_after_the_padding_index():
    # pad_token_id = 1: real tokens are numbered 2, 3, ...; padding keeps position 1
    ids = torch.tensor([[0, 31, 32, 2, 1, 1],
                        [0, 40, 41, 42, 43, 2]])
    assert create_position_ids(ids, pad_token_id=1).tolist() == [[2, 3, 4, 5, 1, 1],
                                                                 [2, 3, 4, 5, 6, 7]]


def test_roberta_rejects_a_sequence_its_positions_cannot_hold():
    cfg = RobertaConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=10)
    model = RobertaModel(cfg)
    assert cfg.max_tokens == 8
    model(torch.full((1, 8), 5))
    with pytest.raises(ValueError, match="holds 8 tokens"):
        model(torch.full((1, 9), 5))


def test_albert_runs_one_layer_many_times():
    cfg = AlbertConfig(vocab_size=50, embedding_size=8, hidden_size=24, num_hidden_layers=5, num_attention_heads=3,
                       intermediate_size=40)
    model = AlbertModel(cfg)
    assert len(model.layers) == 5 and all(layer is model.layers[0] for layer in model.layers)
    assert sum(k.startswith("layers.") for k in model.state_dict()) == len(model.layers[0].state_dict())
    # depth costs no parameters
    assert AlbertModel(cfg.replace(num_hidden_layers=1)).num_parameters() == model.num_parameters()
    # but it is computed: 5 hidden states after the embeddings, each different
    out = model(torch.randint(1, 50, (2, 7)), output_hidden_states=True)
    assert len(out.hidden_states) == 6 and out.hidden_states[0].shape == (2, 7, 24)
    assert not torch.allclose(out.hidden_states[1], out.hidden_states[2])


def test_distilbert_has_no_token_types_and_no_pooler():
    model = DistilBertModel(DistilBertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=2,
                                             num_attention_heads=2, intermediate_size=32)).eval()
    assert model.embeddings.token_type_embeddings is None and model.pooler is None
    ids = torch.randint(1, 50, (2, 5))
    out = model(ids)
    assert out.pooler_output is None
    torch.testing.assert_close(model(ids, torch.zeros_like(ids)).last_hidden_state, out.last_hidden_state)
    with pytest.raises(ValueError, match="no segment embeddings"):
        model(ids, torch.ones_like(ids))


# ---- parity with transformers ----------------------------------------------------------

# Odd sizes, one head, hidden sizes that are not powers of two, non-default activations.
ROBERTA = {
    "odd-sizes": dict(vocab_size=301, hidden_size=45, num_hidden_layers=3, num_attention_heads=5,
                      intermediate_size=77, max_position_embeddings=24, hidden_act="gelu_new"),
    "single-head": dict(vocab_size=97, hidden_size=33, num_hidden_layers=2, num_attention_heads=1,
                        intermediate_size=50, max_position_embeddings=20),
}
ALBERT = {
    "odd-sizes": dict(vocab_size=301, embedding_size=21, hidden_size=45, num_hidden_layers=3, num_attention_heads=5,
                      intermediate_size=77, max_position_embeddings=19, type_vocab_size=3),
    "single-head": dict(vocab_size=97, embedding_size=13, hidden_size=33, num_hidden_layers=2, num_attention_heads=1,
                        intermediate_size=50, max_position_embeddings=16, hidden_act="gelu"),
}
DISTILBERT = {
    "odd-sizes": dict(vocab_size=301, dim=45, n_layers=3, n_heads=5, hidden_dim=77, max_position_embeddings=19),
    "single-head": dict(vocab_size=97, dim=33, n_layers=2, n_heads=1, hidden_dim=50, max_position_embeddings=16,
                        activation="relu"),
}
CASES = [(family, name) for family, table in
         [("roberta", ROBERTA), ("albert", ALBERT), ("distilbert", DISTILBERT)] for name in table]
HF = {  # family -> (config class, heads class, base class, base attribute)
    "roberta": ("RobertaConfig", "RobertaForMaskedLM", "RobertaModel", "roberta", ROBERTA),
    "albert": ("AlbertConfig", "AlbertForPreTraining", "AlbertModel", "albert", ALBERT),
    "distilbert": ("DistilBertConfig", "DistilBertForMaskedLM", "DistilBertModel", "distilbert", DISTILBERT),
}


def random_hf(family: str, name: str, attn: str = "eager", base: bool = False):
    config_class, heads_class, base_class, _, table = HF[family]
    hf_config = getattr(transformers, config_class)(**table[name], attn_implementation=attn)
    torch.manual_seed(11)
    hf = getattr(transformers, base_class if base else heads_class)(hf_config).eval()
    # Random, not default, LayerNorm and bias values, so a swapped tensor cannot hide.
    with torch.no_grad():
        for n, p in hf.named_parameters():
            if "LayerNorm" in n or "layer_norm" in n or n.endswith("bias"):
                p.normal_(0.0 if n.endswith("bias") else 1.0, 0.1)
    return hf


def padded_batch(config, lengths=(12, 5, 9, 1)):
    """A right-padded batch: ids that are never the pad id at real positions, two segments
    where the model has them, (input_ids, token_type_ids or None, attention_mask)."""
    B, T = len(lengths), max(lengths)
    g = torch.Generator().manual_seed(1234)
    pad = config.pad_token_id
    ids = torch.randint(0, config.vocab_size - 1, (B, T), generator=g)
    ids = ids + (ids >= pad).long()  # skip the pad id
    mask = torch.zeros(B, T, dtype=torch.long)
    types = torch.zeros(B, T, dtype=torch.long)
    for i, n in enumerate(lengths):
        mask[i, :n] = 1
        types[i, n // 2: n] = 1
    ids[mask == 0] = pad
    has_types = getattr(config, "type_vocab_size", 0) > 1
    return ids, (types if has_types else None), mask


def close(a, b, what):
    torch.testing.assert_close(a, b, atol=1e-5, rtol=1e-5, msg=lambda m: f"{what}: {m}")


@pytest.mark.parametrize("family,name", CASES)
@pytest.mark.parametrize("hf_attn,ours", [("eager", "reference"), ("sdpa", "sdpa")])
def test_random_transformers_model_converts_to_the_same_function(family, name, hf_attn, ours):
    hf = random_hf(family, name, hf_attn)
    model = from_hf(hf)
    model.bert.set_attn_implementation(ours)
    assert type(model).__name__ == type(hf).__name__ and not model.training
    ids, types, mask = padded_batch(hf.config)
    hf_kwargs = {} if types is None else {"token_type_ids": types}
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask, **hf_kwargs)
        mine = model(ids, types, mask)
        theirs_base = getattr(hf, HF[family][3])(input_ids=ids, attention_mask=mask, **hf_kwargs)
        mine_base = model.bert(ids, types, mask)
    real = mask.bool()
    close(mine_base.last_hidden_state[real], theirs_base.last_hidden_state[real], "last hidden state")
    if family == "albert":
        close(mine.mlm_logits, theirs.prediction_logits, "MLM logits")
        close(mine.sop_logits, theirs.sop_logits, "SOP logits")
        close(mine_base.pooler_output, theirs_base.pooler_output, "pooler")
    else:
        close(mine.mlm_logits, theirs.logits, "MLM logits")


@pytest.mark.parametrize("family,name", CASES)
def test_losses_match_transformers(family, name):
    hf = random_hf(family, name)
    model = from_hf(hf)
    ids, types, mask = padded_batch(hf.config)
    labels = torch.where((torch.rand(ids.shape) < 0.3) & mask.bool(), ids, torch.full_like(ids, -100))
    labels[0, 0] = ids[0, 0]
    kwargs = {} if types is None else {"token_type_ids": types}
    extra = {"sentence_order_label": torch.tensor([0, 1, 1, 0])} if family == "albert" else {}
    with torch.no_grad():
        theirs = hf(input_ids=ids, attention_mask=mask, labels=labels, **kwargs, **extra).loss
        mine = model(ids, types, mask, labels, **extra).loss
    close(mine, theirs, "loss")


@pytest.mark.parametrize("family,name", CASES)
def test_round_trip_bertedu_transformers_bertedu_is_exact(family, name):
    model = from_hf(random_hf(family, name))
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


@pytest.mark.parametrize("family,name", CASES)
def test_base_models_round_trip_transformers_bertedu_transformers_exactly(family, name):
    hf = random_hf(family, name, base=True)
    model = from_hf(hf)
    assert type(model).__name__ == type(hf).__name__
    assert (model.pooler is not None) == (family != "distilbert")
    hf2 = to_hf(model)
    a, b = hf.state_dict(), hf2.state_dict()
    assert a.keys() == b.keys()
    for k in a:
        assert torch.equal(a[k], b[k]), k


def test_from_hf_names_what_it_takes():
    with pytest.raises(TypeError, match="RobertaForMaskedLM"):
        from_hf(torch.nn.Linear(2, 2))
    with pytest.raises(ValueError, match="num_hidden_groups=1"):
        from_hf(transformers.AlbertModel(transformers.AlbertConfig(**ALBERT["single-head"], num_hidden_groups=2)))


def test_models_built_here_match_their_transformers_twins():
    """The other direction: bertedu's own models, initialised here, to transformers and compared."""
    for model in (RobertaForMaskedLM(RobertaConfig.from_hf(transformers.RobertaConfig(**ROBERTA["odd-sizes"]))),
                  AlbertForPreTraining(AlbertConfig(**ALBERT["odd-sizes"])),
                  DistilBertForMaskedLM(DistilBertConfig.from_hf(transformers.DistilBertConfig(
                      **DISTILBERT["odd-sizes"])))):
        model.eval()
        hf = to_hf(model)
        ids, types, mask = padded_batch(model.config)
        kwargs = {} if types is None else {"token_type_ids": types}
        with torch.no_grad():
            theirs = hf(input_ids=ids, attention_mask=mask, **kwargs)
            mine = model(ids, types, mask)
        close(mine.mlm_logits, getattr(theirs, "logits", None) if hasattr(theirs, "logits")
              else theirs.prediction_logits, type(model).__name__)


# ---- the fast path runs every variant ------------------------------------------------------

def variant_models():
    no_dropout = dict(hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
    return {
        "roberta": RobertaForMaskedLM(RobertaConfig(**{**ROBERTA["odd-sizes"], "hidden_act": "gelu"}, **no_dropout)),
        "albert": AlbertForPreTraining(AlbertConfig(**ALBERT["odd-sizes"], **no_dropout, classifier_dropout_prob=0.0)),
        "distilbert": DistilBertForMaskedLM(DistilBertConfig.from_hf(transformers.DistilBertConfig(
            **DISTILBERT["odd-sizes"], dropout=0.0, attention_dropout=0.0))),
    }


def loss_and_grads(model, *args, **kwargs):
    model.zero_grad()
    out = model(*args, **kwargs)
    out.loss.backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}


@pytest.mark.parametrize("family", ["roberta", "albert", "distilbert"])
@pytest.mark.parametrize("options", [
    dict(unpad=True, sparse_mlm=True, attention="padded"),
    dict(unpad=True, sparse_mlm=True, attention="nested"),
    dict(sparse_mlm=True),
    dict(unpad=True, attention="padded"),
])
def test_fast_path_matches_the_readable_path_for_every_variant(family, options):
    import copy

    from bertedu.model.fast import set_fast_path

    torch.manual_seed(0)
    readable = variant_models()[family].train()  # dropout is 0: train mode, the same function
    fast_model = set_fast_path(copy.deepcopy(readable), **options)
    ids, types, mask = padded_batch(readable.config, lengths=(12, 5, 9, 3))
    labels = torch.where((torch.rand(ids.shape) < 0.3) & mask.bool(), ids, torch.full_like(ids, -100))
    labels[:, 0] = ids[:, 0]  # every sequence has a label
    extra = {"sentence_order_label": torch.tensor([0, 1, 1, 0])} if family == "albert" else {}
    ref, ref_grads = loss_and_grads(readable, ids, types, mask, labels, **extra)
    out, grads = loss_and_grads(fast_model, ids, types, mask, labels, **extra)
    assert type(out) is type(ref)
    close(out.loss, ref.loss, "loss")
    close(out.mlm_loss, ref.mlm_loss, "MLM loss")
    if family == "albert":
        close(out.sop_logits, ref.sop_logits, "SOP logits")
    assert grads.keys() == ref_grads.keys()
    for name, g in ref_grads.items():
        close(grads[name], g, name)
    if options.get("sparse_mlm"):
        labelled = labels != -100
        close(out.mlm_logits, ref.mlm_logits[labelled], "sparse MLM logits")
        assert torch.equal(out.mlm_labels, labels[labelled])


def test_variants_save_and_load_through_the_checkpoint_module(tmp_path):
    from bertedu.training.checkpoint import load_weights, save_weights

    for family, model in variant_models().items():
        with torch.no_grad():
            for p in model.parameters():
                p.normal_()
        folder = save_weights(tmp_path / family, model)
        fresh = type(model)(model.config)
        load_weights(folder, fresh)
        a, b = model.state_dict(), fresh.state_dict()
        assert a.keys() == b.keys()
        for k in a:
            assert torch.equal(a[k], b[k]), (family, k)
        assert fresh.mlm.decoder.weight is fresh.bert.embeddings.word_embeddings.weight


def test_roberta_pairs_read_as_transformers_roberta_tokenizer_builds_them():
    """<s> A </s></s> B </s>, every token type 0: the separators mark where A ends (notebook 15)."""
    import tempfile

    from tokenizers import ByteLevelBPETokenizer

    from bertedu.family.roberta import pair_input_ids

    assert pair_input_ids([5, 6], [7]) == [0, 5, 6, 2, 2, 7, 2]
    bpe = ByteLevelBPETokenizer()
    bpe.train_from_iterator(["the cat sat on the mat.", "it was tired and it slept."] * 20, vocab_size=300,
                            min_frequency=2, special_tokens=["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
                            show_progress=False)
    names = ("vocab", "merges") if int(transformers.__version__.split(".")[0]) >= 5 else ("vocab_file", "merges_file")
    with tempfile.TemporaryDirectory() as folder:
        bpe.save_model(folder)
        hf = transformers.RobertaTokenizer(**{names[0]: f"{folder}/vocab.json", names[1]: f"{folder}/merges.txt"})
        pair = hf("The cat sat.", "It was tired.", return_token_type_ids=True)
    assert pair["input_ids"] == pair_input_ids(bpe.encode("The cat sat.").ids, bpe.encode("It was tired.").ids)
    assert set(pair["token_type_ids"]) == {0}
