"""A padded vocabulary (`BertConfig.pad_vocab_to_multiple_of`, `bertedu pretrain
--pad-vocab-to-multiple-of N`; issue 52 item 5): the word-embedding table and the tied MLM
decoder get a multiple of N rows (a faster shape for GPU matrix products) while the model
computes exactly what the unpadded model computes: same initial weights seed for seed, same
loss, logits and gradients, on the readable and the fast path; the extra rows are never an
input, never predicted and never trained; runs made with it load, fine-tune and export."""

import json

import pytest
import torch
from safetensors.torch import load_file

from bertedu import BertConfig, BertForPreTraining
from bertedu.cli import main
from bertedu.model.fast import set_fast_path
from bertedu.training.checkpoint import CheckpointError, latest_checkpoint, load_weights
from bertedu.training.pretrain import PretrainConfig, fill_mask, load_pretrained
from conftest import tiny_sentence_task

TOL = dict(rtol=1e-5, atol=1e-5)  # fp32: only the decoder's matrix is larger
V = 97  # a prime: padded to 128 at 64, to 104 at 8


def config(**kw) -> BertConfig:
    return BertConfig.tiny(vocab_size=V, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, **kw)


def batch(B=3, T=12, seed=0) -> dict:
    g = torch.Generator().manual_seed(seed)
    lengths = torch.tensor([T, 5, 9][:B])
    real = torch.arange(T)[None, :] < lengths[:, None]  # right padding, as the collators make
    ids = torch.randint(5, V, (B, T), generator=g) * real
    labels = torch.where(real & (torch.rand(B, T, generator=g) < 0.4), ids, torch.full_like(ids, -100))
    labels[:, 1] = ids[:, 1]  # every sequence has a label
    return dict(input_ids=ids, attention_mask=real.long(), labels=labels,
                next_sentence_label=torch.tensor([0, 1, 0][:B]))


def built(cfg: BertConfig, seed: int = 0) -> BertForPreTraining:
    torch.manual_seed(seed)
    return BertForPreTraining(cfg)


def loss_and_grads(model, inputs):
    model.zero_grad()
    out = model(**inputs)
    out.loss.backward()
    return out, {n: p.grad.clone() for n, p in model.named_parameters()}


def test_rows_are_a_multiple_and_the_tokenizer_size_stays_the_vocab_size():
    for multiple, rows in [(None, V), (1, V), (8, 104), (64, 128), (97, 97)]:
        cfg = config(pad_vocab_to_multiple_of=multiple)
        model = BertForPreTraining(cfg)
        assert cfg.vocab_size == V and cfg.padded_vocab_size == rows
        assert model.bert.embeddings.word_embeddings.weight.shape == (rows, 128)
        assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight  # still tied
        assert model.mlm.decoder.bias.shape == (rows,)
    minilm_sized = BertConfig.base(pad_vocab_to_multiple_of=64)
    assert minilm_sized.padded_vocab_size == 30_528 and minilm_sized.padded_vocab_size % 64 == 0
    assert "pad_vocab_to_multiple_of" not in minilm_sized.to_hf_dict()  # transformers gets vocab_size 30,522


def test_a_padded_model_starts_with_the_unpadded_models_weights_seed_for_seed():
    plain, padded = built(config()).state_dict(), built(config(pad_vocab_to_multiple_of=64)).state_dict()
    assert plain.keys() == padded.keys()
    for name, t in plain.items():
        torch.testing.assert_close(padded[name][: t.shape[0]], t, rtol=0, atol=0)
        if padded[name].shape != t.shape:  # the word embeddings, the tied decoder and its bias
            assert padded[name].shape[0] == 128 and not padded[name][V:].any(), name  # extra rows: zeros


@pytest.mark.parametrize("path", ["readable", "unpad", "unpad+sparse_mlm"])
def test_same_loss_logits_and_gradients_as_the_unpadded_model(path):
    plain = built(config())
    padded = built(config(pad_vocab_to_multiple_of=64), seed=1)  # other weights: the copy below is what counts
    with torch.no_grad():
        for name, p in padded.state_dict().items():
            p[: plain.state_dict()[name].shape[0]].copy_(plain.state_dict()[name])
    for model in (plain, padded):
        set_fast_path(model, unpad="unpad" in path, sparse_mlm="sparse_mlm" in path)
    inputs = batch()
    (out_a, grads_a), (out_b, grads_b) = loss_and_grads(plain, inputs), loss_and_grads(padded, inputs)
    assert out_b.mlm_logits.shape == out_a.mlm_logits.shape and out_b.mlm_logits.shape[-1] == V
    torch.testing.assert_close(out_b.mlm_logits, out_a.mlm_logits, **TOL)
    torch.testing.assert_close(out_b.loss, out_a.loss, **TOL)
    for name, g in grads_a.items():
        torch.testing.assert_close(grads_b[name][: g.shape[0]], g, **TOL)
        assert not grads_b[name][g.shape[0]:].any(), name  # the extra rows get no gradient at all


def test_the_extra_rows_are_never_an_input_never_predicted_never_trained():
    model = built(config(pad_vocab_to_multiple_of=64))
    with pytest.raises(ValueError, match=f"outside the model's vocabulary of {V}"):
        model(torch.tensor([[2, V, 3]]))  # the first padded row is not a token
    inputs = batch()
    probs = model(inputs["input_ids"], attention_mask=inputs["attention_mask"]).mlm_logits.softmax(-1)
    assert probs.shape[-1] == V  # the softmax runs over the real vocabulary only: no probability is left
    torch.testing.assert_close(probs.sum(-1), torch.ones(probs.shape[:-1]))  # for the 31 padded rows
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2, weight_decay=0.01)
    for _ in range(3):  # zero rows, zero gradients: Adam's update and the decoupled decay are both 0
        loss_and_grads(model, inputs)
        optimizer.step()
    assert not model.bert.embeddings.word_embeddings.weight[V:].any() and not model.mlm.decoder.bias[V:].any()


def test_a_checkpoint_of_a_padded_model_needs_the_same_padding(tmp_path):
    from bertedu.training.checkpoint import save_weights

    save_weights(tmp_path / "padded", built(config(pad_vocab_to_multiple_of=64)))
    saved = json.loads((tmp_path / "padded" / "config.json").read_text())
    assert (saved["vocab_size"], saved["pad_vocab_to_multiple_of"]) == (V, 64)  # the real size is recorded
    load_weights(tmp_path / "padded", built(config(pad_vocab_to_multiple_of=64)))
    with pytest.raises(CheckpointError, match="pad_vocab_to_multiple_of: checkpoint 64 vs model None"):
        load_weights(tmp_path / "padded", built(config()))


@pytest.mark.parametrize("value", [0, -64, 6.5, True, "64"])
def test_a_bad_multiple_is_refused_in_one_line(value):
    with pytest.raises(ValueError, match="pad_vocab_to_multiple_of") as err:
        config(pad_vocab_to_multiple_of=value)
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="--pad-vocab-to-multiple-of") as err:
        PretrainConfig(preset="tiny", steps=1, pad_vocab_to_multiple_of=value)
    assert "\n" not in str(err.value)


def test_bad_values_on_the_command_line(capsys):
    for value, says in [("0", "give a whole number of at least 1"), ("-64", "give a whole number of at least 1"),
                        ("abc", "invalid int value: 'abc'"), ("6.5", "invalid int value: '6.5'")]:
        try:  # argparse refuses what is no int (usage, then its error line); the config the rest, in one line
            code = main(["pretrain", "--preset", "tiny", "--steps", "1", "--pad-vocab-to-multiple-of", value,
                         "--out", "unused"])
        except SystemExit as stop:
            code = stop.code
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and err[-1].startswith("bertedu pretrain: error:") and says in err[-1], err
        assert "--pad-vocab-to-multiple-of" in err[-1]
        assert len(err) == 1 or not value.lstrip("-").isdigit()
    assert main(["pretrain", "--steps", "1", "--init-from", "minilm", "--pad-vocab-to-multiple-of", "64",
                 "--out", "unused"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "brings its own unpadded table" in err[0], err


def test_docs_gpu_route_pads_the_vocabulary_in_both_phases():
    from test_gpu_route import route_commands

    from bertedu.cli import _config_from_args, build_parser

    parser = build_parser()
    phases = [_config_from_args(PretrainConfig, parser.parse_args(c)) for c in route_commands()[:2]]
    assert [cfg.pad_vocab_to_multiple_of for cfg in phases] == [64, 64]


@pytest.mark.slow
def test_a_padded_run_fills_masks_measures_finetunes_and_exports(tmp_path, capsys):
    transformers = pytest.importorskip("transformers")
    run = tmp_path / "run"
    assert main(["pretrain", "--preset", "tiny", "--steps", "2", "--batch-size", "4", "--corpus", "wiki-en",
                 "--max-documents", "12", "--vocab-size", "600", "--no-progress", "--max-seq-length", "48",
                 "--packing", "documents", "--no-nsp", "--unigram-bias", "--max-eval-examples", "8",
                 "--pad-vocab-to-multiple-of", "64", "--out", str(run)]) == 0
    model, tok = load_pretrained(run)
    rows = model.bert.embeddings.word_embeddings.weight.shape[0]
    assert model.config.vocab_size == len(tok) and rows % 64 == 0 and len(tok) < rows < len(tok) + 64
    assert json.loads((run / "run.json").read_text())["pad_vocab_to_multiple_of"] == 64
    weights = load_file(str(latest_checkpoint(run) / "model.safetensors"))
    assert not weights["bert.embeddings.word_embeddings.weight"][len(tok):].any()  # trained, still zero
    assert not weights["mlm.decoder.bias"][len(tok):].any()  # --unigram-bias filled the real entries only
    assert weights["mlm.decoder.bias"][: len(tok)].any()

    predicted = fill_mask(model, tok, "the [MASK] of the city .", top_k=len(tok) + 10)[0]
    assert len(predicted) == len(tok)  # every real token, and nothing beyond them
    assert main(["fill-mask", str(run), "the [MASK] of the city ."]) == 0
    assert "[MASK] 1:" in capsys.readouterr().out
    assert main(["masked-accuracy", str(run), "--max-sequences", "4", "--no-progress"]) == 0
    assert 0.0 <= json.loads(capsys.readouterr().out)["accuracy"] <= 1.0

    sst = tiny_sentence_task(tmp_path / "sst")
    ft = tmp_path / "ft"
    assert main(["finetune", "--task", sst, "--init", str(run), "--out", str(ft), "--steps", "2",
                 "--batch-size", "4", "--max-seq-length", "48", "--no-progress"]) == 0
    capsys.readouterr()

    for source, architecture in [(run, "BertForMaskedLM"), (ft, "BertForSequenceClassification")]:
        out = tmp_path / f"hf-{source.name}"
        assert main(["export", str(source), str(out)]) == 0  # which checks transformers' logits against ours
        summary = json.loads(capsys.readouterr().out)
        assert summary["architecture"] == architecture
        hf = transformers.AutoModel.from_pretrained(out)
        assert hf.config.vocab_size == len(tok) and hf.get_input_embeddings().weight.shape[0] == len(tok)
        assert "pad_vocab_to_multiple_of" not in json.loads((out / "config.json").read_text())
