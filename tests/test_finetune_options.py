"""`bertedu finetune --freeze-layers N`, `--layer-lr-decay D` and `--dropout P`: what they
freeze, which learning rate each part gets, which dropout acts; their defaults leave a run bit
for bit as it was; their misuses are one-line errors.

Runs are tiny (the tiny preset, 2 layers, from random weights, on a vocabulary of a few dozen
words, 3 steps): what is checked is the plumbing, not whether either option helps.
"""

import json
import random

import pytest
import torch
from safetensors.torch import load_file

import bertedu.training.loop as loop
from bertedu.cli import main
from bertedu.model.config import BertConfig
from bertedu.model.tasks import (
    BertForQuestionAnswering,
    BertForSequenceClassification,
    BertForTokenClassification,
    set_dropout,
)
from bertedu.training.finetune import (
    FinetuneConfig,
    _load_task_data,
    build_model,
    freeze_lower_layers,
    layerwise_lrs,
)
from bertedu.training.loop import param_groups

POSITIVE = ["a wonderful , moving film", "great acting and a fine story", "brilliant , funny and warm"]
NEGATIVE = ["a dull , boring mess", "terrible acting and a weak story", "stupid , ugly and cold"]
LR = 1e-3


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    """An SST-2-format folder (train, dev) and a vocabulary of its words."""
    from bertedu.data.tokenizer import SPECIAL_TOKENS

    folder = tmp_path_factory.mktemp("options")
    rng = random.Random(0)
    for split, n in (("train", 32), ("dev", 8)):
        rows = [(rng.choice(POSITIVE if i % 2 else NEGATIVE), i % 2) for i in range(n)]
        (folder / f"{split}.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in rows))
    words = sorted({w for s in POSITIVE + NEGATIVE for w in s.split()})
    (folder / "vocab.txt").write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n")
    return folder


def run_args(data, out, *flags) -> list[str]:
    return ["finetune", "--task", str(data), "--init", "random", "--preset", "tiny", "--vocab",
            str(data / "vocab.txt"), "--steps", "3", "--eval-every", "3", "--batch-size", "8",
            "--max-seq-length", "16", "--lr", str(LR), "--warmup-ratio", "0", "--no-progress",
            "--out", str(out), *flags]


@pytest.fixture(scope="module")
def runs(data, tmp_path_factory):
    """name -> (out folder, the optimizer the run trained with) for four runs of the same seed."""
    flags = {"plain": [], "defaults": ["--freeze-layers", "0", "--layer-lr-decay", "1.0"],
             "frozen": ["--freeze-layers", "1"], "decay": ["--layer-lr-decay", "0.5"],
             "dropout 0.1": ["--dropout", "0.1"], "dropout 0": ["--dropout", "0"]}
    make_optimizer, made, result = loop.make_optimizer, [], {}
    with pytest.MonkeyPatch.context() as mp:  # keep each run's optimizer, to read its groups after
        mp.setattr(loop, "make_optimizer", lambda *a, **k: made.append(make_optimizer(*a, **k)) or made[-1])
        for name, extra in flags.items():
            out = tmp_path_factory.mktemp(name.replace(" ", "")) / "run"
            assert main(run_args(data, out, *extra)) == 0
            result[name] = (out, made[-1])
    return result


def weights(out) -> dict[str, torch.Tensor]:
    return load_file(str(out / "model" / "model.safetensors"))


def initial_weights(out) -> dict[str, torch.Tensor]:
    """The weights the run started from: its model built again from its recorded config (same seed)."""
    cfg = FinetuneConfig(**json.loads((out / "results.json").read_text())["config"])
    model, _ = build_model(cfg, _load_task_data(cfg), out.parent / "rebuilt")
    return {k: v.detach().clone() for k, v in model.state_dict().items()}


def test_the_lr_map_decays_by_layer_and_never_confuses_layer_1_with_layer_10():
    lrs = layerwise_lrs(12, LR, 0.5)
    assert lrs["bert.embeddings."] == LR * 0.5 ** 12
    assert lrs["bert.layers.0."] == LR * 0.5 ** 11  # layer l = 1, the lowest
    assert lrs["bert.layers.11."] == LR  # layer l = L = 12, the top
    assert len(lrs) == 13 and all(prefix.endswith(".") for prefix in lrs)
    assert layerwise_lrs(12, LR, 1.0) == {}  # no decay: no groups of their own

    model = BertForSequenceClassification(BertConfig.tiny(vocab_size=64, num_hidden_layers=12), num_labels=2)
    groups = param_groups(model, 0.01, {**lrs, "crf.": 1e-2})
    peak = {name: g.get("peak_lr") for g in groups for name in g["names"]}
    assert peak["bert.layers.1.attention.query.weight"] == LR * 0.5 ** 10  # not layer 10's
    assert peak["bert.layers.10.attention.query.weight"] == LR * 0.5
    assert peak["bert.layers.10.output_norm.bias"] == LR * 0.5
    assert peak["bert.embeddings.word_embeddings.weight"] == LR * 0.5 ** 12
    assert peak["bert.embeddings.layer_norm.weight"] == LR * 0.5 ** 12
    assert peak["classifier.weight"] is None and peak["bert.pooler.dense.weight"] is None  # the config's lr
    assert len(peak) == len(list(model.parameters()))
    # weight decay still spares biases and LayerNorm inside each layer's groups
    decay = {name: g["weight_decay"] for g in groups for name in g["names"]}
    assert decay["bert.layers.3.feed_forward.dense_in.weight"] == 0.01
    assert decay["bert.layers.3.feed_forward.dense_in.bias"] == decay["bert.layers.3.attention_norm.weight"] == 0


def test_freezing_the_lowest_layers_takes_them_out_of_the_optimizer():
    model = BertForTokenClassification(BertConfig.tiny(vocab_size=64, num_hidden_layers=3), num_labels=3)
    frozen = freeze_lower_layers(model, 2)
    names = {name for g in param_groups(model, 0.01, layerwise_lrs(3, LR, 0.5)) for name in g["names"]}
    expected = [n for n, _ in model.named_parameters() if n.startswith(("bert.layers.2.", "bert.pooler.", "classifier."))]
    assert sorted(names) == sorted(expected)
    assert frozen == sum(p.numel() for p in model.parameters() if not p.requires_grad)
    assert freeze_lower_layers(BertForTokenClassification(BertConfig.tiny(vocab_size=64), num_labels=3), 0) == 0
    with pytest.raises(ValueError, match="n must be in 0..3"):
        freeze_lower_layers(model, 4)


@pytest.mark.slow
def test_the_defaults_change_nothing_bit_for_bit(runs):
    plain, defaults = weights(runs["plain"][0]), weights(runs["defaults"][0])
    assert plain.keys() == defaults.keys()
    assert all(torch.equal(plain[k], defaults[k]) for k in plain)
    assert len(runs["plain"][1].param_groups) == len(runs["defaults"][1].param_groups) == 2
    results = json.loads((runs["defaults"][0] / "results.json").read_text())
    assert results["config"]["freeze_layers"] == 0 and results["config"]["layer_lr_decay"] == 1.0


@pytest.mark.slow
def test_frozen_layers_stay_bit_identical_and_the_rest_moves(runs):
    out, optimizer = runs["frozen"]
    before, after = initial_weights(out), weights(out)
    frozen = [k for k in after if k.startswith(("bert.embeddings.", "bert.layers.0."))]
    trained = [k for k in after if k not in frozen]
    assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)
    # every trained tensor moved (LayerNorm gains and biases included)
    assert trained and all(not torch.equal(before[k], after[k]) for k in trained)
    in_optimizer = {name for g in optimizer.param_groups for name in g["names"]}
    assert in_optimizer == set(trained)
    assert json.loads((out / "results.json").read_text())["config"]["freeze_layers"] == 1


@pytest.mark.slow
def test_each_layer_trains_at_its_decayed_rate(runs):
    out, optimizer = runs["decay"]
    expected = layerwise_lrs(2, LR, 0.5)  # the tiny preset has 2 layers
    assert expected == {"bert.embeddings.": LR * 0.25, "bert.layers.0.": LR * 0.5, "bert.layers.1.": LR}
    rates = {}  # prefix -> the last step's rate: the schedule's multiplier times the group's peak
    for group in optimizer.param_groups:
        prefixes = {next((p for p in expected if name.startswith(p)), "head") for name in group["names"]}
        assert len(prefixes) == 1, prefixes
        prefix = prefixes.pop()
        assert group.get("peak_lr") == expected.get(prefix)  # the head (and pooler): the config's lr
        rates[prefix] = group["lr"]
    assert set(rates) == {*expected, "head"}
    assert rates["head"] > 0
    assert rates["bert.layers.1."] == pytest.approx(rates["head"])
    assert rates["bert.layers.0."] == pytest.approx(rates["head"] * 0.5)
    assert rates["bert.embeddings."] == pytest.approx(rates["head"] * 0.25)
    results = json.loads((out / "results.json").read_text())
    assert results["config"]["layer_lr_decay"] == 0.5 and results["lr"] == LR
    plain = weights(runs["plain"][0])
    assert not torch.equal(weights(out)["bert.layers.0.attention.query.weight"],
                           plain["bert.layers.0.attention.query.weight"])


@pytest.mark.parametrize("model", [
    BertForSequenceClassification(BertConfig.tiny(vocab_size=64), num_labels=2),
    BertForQuestionAnswering(BertConfig.tiny(vocab_size=64)),
])
def test_set_dropout_reaches_every_dropout_and_the_config(model):
    ids = torch.randint(5, 64, (3, 12))

    def logits(training: bool) -> torch.Tensor:
        out = model.train(training)(ids)
        return out.start_logits if isinstance(model, BertForQuestionAnswering) else out.logits

    torch.manual_seed(0)
    assert not torch.equal(logits(True), logits(False))  # the preset's dropout acts in training mode
    set_dropout(model, 0.0)
    rates = [m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)]
    assert rates and set(rates) == {0.0}
    assert {m.dropout_p for m in model.modules() if hasattr(m, "dropout_p")} == {0.0}
    for part in (model, model.bert, model.bert.embeddings):
        assert part.config.hidden_dropout_prob == part.config.attention_probs_dropout_prob == 0.0
    assert torch.equal(logits(True), logits(False))  # training mode, no randomness left
    set_dropout(model, 0.3)
    assert {m.p for m in model.modules() if isinstance(m, torch.nn.Dropout)} == {0.3}
    with pytest.raises(ValueError, match="in \\[0, 1\\)"):
        set_dropout(model, 1.0)


@pytest.mark.slow
def test_dropout_is_recorded_and_its_default_changes_nothing(runs):
    plain, same, off = (weights(runs[name][0]) for name in ("plain", "dropout 0.1", "dropout 0"))
    assert all(torch.equal(plain[k], same[k]) for k in plain)  # the tiny preset's own rate is 0.1
    assert any(not torch.equal(plain[k], off[k]) for k in plain)  # no dropout: another run
    config = json.loads((runs["dropout 0"][0] / "model" / "config.json").read_text())
    assert config["hidden_dropout_prob"] == config["attention_probs_dropout_prob"] == 0.0
    assert json.loads((runs["dropout 0"][0] / "results.json").read_text())["config"]["dropout"] == 0.0


def one_line_error(capsys, args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertedu finetune: error: "), err
    return err[0]


@pytest.mark.parametrize("flags, says", [
    (["--freeze-layers", "1", "--freeze-encoder"], "--freeze-layers freezes the lowest layers, --freeze-encoder "
                                                   "the whole encoder: give one of them"),
    (["--freeze-layers", "-1"], "freeze_layers counts encoder layers: 0 (none) or more, got -1"),
    (["--layer-lr-decay", "0"], "layer_lr_decay must be in (0, 1] (1: no decay), got 0.0"),
    (["--layer-lr-decay", "1.5"], "layer_lr_decay must be in (0, 1]"),
    (["--layer-lr-decay", "nan"], "layer_lr_decay must be in (0, 1]"),
    (["--dropout", "1"], "dropout must be in [0, 1) (0: none), got 1.0"),
    (["--dropout", "-0.1"], "dropout must be in [0, 1)"),
    (["--layer-lr-decay", "0.8", "--freeze-encoder"], "--freeze-encoder trains none of them: drop one of the two"),
])
def test_settings_that_cannot_work_are_one_line(capsys, flags, says):
    assert says in one_line_error(capsys, ["finetune", "--task", "ner-en", *flags])


def test_freezing_more_layers_than_the_encoder_has_is_one_line(capsys, data, tmp_path):
    line = one_line_error(capsys, run_args(data, tmp_path / "run", "--freeze-layers", "3"))
    assert "--freeze-layers 3: the encoder has 2 layers; freeze at most 2" in line
    assert not (tmp_path / "run" / "results.json").exists()
