"""The pretraining pipeline and the `bertedu pretrain` / `fill-mask` command line."""

import json

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import latest_checkpoint
from bertedu.cli import build_parser, main, parse_duration
from bertedu.errors import SettingError
from bertedu.training.pretrain import PretrainConfig, fill_mask, load_pretrained, pretrain

pytestmark = pytest.mark.slow  # seconds to a minute each: deselected by the quick tier (-m 'not slow')

SMALL = ["--corpus", "wiki-en", "--max-documents", "24", "--vocab-size", "1500", "--no-progress",
         "--max-seq-length", "64", "--log-every", "2"]


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("tiny-run")
    # the held-out measure need only be there (16 examples, not the default 512)
    assert main(["pretrain", "--preset", "tiny", "--steps", "12", "--batch-size", "8", "--max-eval-examples", "16",
                 "--out", str(out), *SMALL]) == 0
    return out


def test_pretrain_writes_vocab_checkpoint_metrics_and_plot(tiny_run):
    assert (tiny_run / "vocab.txt").read_text().splitlines()[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    assert latest_checkpoint(tiny_run).name == "checkpoint-12"
    records = [json.loads(line) for line in (tiny_run / "metrics.jsonl").read_text().splitlines()]
    steps = [r["step"] for r in records if "loss" in r]
    assert steps == [2, 4, 6, 8, 10, 12]
    final_eval = [r for r in records if "eval_mlm_accuracy" in r][-1]
    assert 0.0 <= final_eval["eval_mlm_accuracy"] <= 1.0 and 0.0 <= final_eval["eval_nsp_accuracy"] <= 1.0
    assert (tiny_run / "metrics.png").read_bytes()[:4] == b"\x89PNG"
    assert json.loads((tiny_run / "run.json").read_text())["preset"] == "tiny"


def test_a_second_run_in_the_same_folder_needs_resume(tiny_run):
    with pytest.raises(FileExistsError, match="--resume"):
        pretrain(PretrainConfig(preset="tiny", steps=1, out=str(tiny_run), corpus="wiki-en", max_documents=24))


def test_fill_mask_from_a_run_never_suggests_special_tokens(tiny_run):
    model, tok = load_pretrained(tiny_run)
    preds = fill_mask(model, tok, "the [MASK] of the city is [MASK] .", top_k=5)
    assert len(preds) == 2 and all(len(p) == 5 for p in preds)
    for row in preds:
        assert not {t for t, _ in row} & {"[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"}
        probs = [p for _, p in row]
        assert probs == sorted(probs, reverse=True) and 0 < sum(probs) <= 1
    with pytest.raises(ValueError, match="no \\[MASK\\]"):
        fill_mask(model, tok, "nothing to fill")


def test_phase_two_starts_from_phase_one_weights(tiny_run, tmp_path):
    out = tmp_path / "phase2"
    pretrain(PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=24, steps=1, lr=1e-12, warmup_ratio=0.0,
                            batch_size=4, max_seq_length=128, max_eval_examples=8, init_from=str(tiny_run),
                            out=str(out), progress=False))
    assert (out / "vocab.txt").read_text() == (tiny_run / "vocab.txt").read_text()
    before = load_file(str(latest_checkpoint(tiny_run) / "model.safetensors"))
    after = load_file(str(latest_checkpoint(out) / "model.safetensors"))
    for name, tensor in before.items():
        torch.testing.assert_close(after[name], tensor, atol=1e-6, rtol=0)


def test_init_from_takes_a_shipped_masked_lm_by_name(tmp_path):
    """`--init-from course-en`: the shipped model's vocabulary and architecture (not --preset's),
    and its weights, moved only by one step at lr 1e-12."""
    from bertedu.pretrained import load_masked_lm, masked_lm_vocab_path

    out = tmp_path / "from-course-en"
    assert main(["pretrain", "--init-from", "course-en", "--preset", "tiny", "--steps", "1", "--lr", "1e-12",
                 "--warmup-ratio", "0", "--batch-size", "4", "--max-eval-examples", "8", "--out", str(out),
                 *SMALL]) == 0
    assert (out / "vocab.txt").read_bytes() == masked_lm_vocab_path("course-en").read_bytes()
    shipped, _ = load_masked_lm("course-en")
    model, _ = load_pretrained(out)
    assert model.config == shipped.config  # 4 layers of 256, not the tiny preset
    for name, tensor in shipped.state_dict().items():
        torch.testing.assert_close(model.state_dict()[name], tensor, atol=1e-6, rtol=0)


def test_init_from_a_shipped_masked_lm_refuses_sequences_longer_than_its_positions(tmp_path, monkeypatch, capsys):
    """Every shipped model has 512 positions today; one with 128 must refuse --max-seq-length 256 in one line."""
    import shutil

    import bertedu.training.pretrain
    from bertedu.pretrained import masked_lm_dir

    short = tmp_path / "course-en-128"
    shutil.copytree(masked_lm_dir("course-en"), short)
    config = json.loads((short / "config.json").read_text())
    (short / "config.json").write_text(json.dumps({**config, "max_position_embeddings": 128}))
    monkeypatch.setattr(bertedu.training.pretrain, "masked_lm_dir", lambda name: short)
    assert main(["pretrain", "--init-from", "course-en", "--steps", "1", "--out", str(tmp_path / "long"), *SMALL,
                 "--max-seq-length", "256"]) == 2
    assert "--init-from course-en has 128 positions, fewer than --max-seq-length 256" in capsys.readouterr().err


def test_base_preset_runs_a_few_steps_on_cpu(tmp_path):
    out = tmp_path / "base"
    assert main(["pretrain", "--preset", "base", "--steps", "2", "--batch-size", "2", "--out", str(out),
                 *SMALL, "--max-seq-length", "32", "--max-eval-examples", "4"]) == 0
    model, _ = load_pretrained(out)
    assert model.config.num_hidden_layers == 12 and model.config.hidden_size == 768
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(torch.isfinite(torch.tensor(r["loss"])) for r in records if "loss" in r)


def test_help_explains_every_flag(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--help"])
    text = capsys.readouterr().out
    for field in PretrainConfig.__dataclass_fields__:
        assert "--" + field.replace("_", "-") in text
    assert "--resume" in text and "wiki-en" in text and "peoples-daily-zh" in text


def test_bad_arguments_give_clear_errors(capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["pretrain", "--preset", "huge"])
    assert "invalid choice: 'huge'" in capsys.readouterr().err
    assert main(["pretrain", "--preset", "tiny"]) == 2  # no budget
    assert "give a budget" in capsys.readouterr().err
    assert parse_duration("45m") == 2700 and parse_duration("2h") == 7200 and parse_duration("90") == 90


class _EpochRecorder(torch.utils.data.Dataset):
    def __init__(self):
        self.epochs = []

    def set_epoch(self, epoch):
        self.epochs.append(epoch)

    def __len__(self):
        return 4

    def __getitem__(self, i):
        return i


def test_training_loop_tells_the_data_set_each_epoch():
    """Dynamic masking draws fresh masks per epoch only if the loop calls set_epoch."""
    from bertedu.training.loop import TrainConfig, train

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return type("Out", (), {"loss": ((self.w - x.float().mean()) ** 2).sum()})()

    data = _EpochRecorder()
    train(Net(), data, lambda ex, g: {"x": torch.tensor(ex)}, TrainConfig(steps=6, batch_size=2, progress=False))
    assert data.epochs[:3] == [0, 1, 2]


def test_chinese_whole_word_run_uses_a_character_vocabulary(tmp_path):
    out = tmp_path / "zh"
    result = pretrain(PretrainConfig(preset="tiny", corpus="peoples-daily-zh", max_documents=40, steps=2, batch_size=4,
                                     max_seq_length=64, whole_word=True, max_eval_examples=8, out=str(out),
                                     progress=False))
    assert result.step == 2
    _, tok = load_pretrained(out)
    assert tok.tokenize("人民日报") == ["人", "民", "日", "报"]  # one token per character


def test_fill_mask_command_compares_with_an_untrained_model(tiny_run, capsys):
    assert main(["fill-mask", str(tiny_run), "the [MASK] of the city .", "--top-k", "3", "--untrained"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "the [MASK] of the city ."
    assert lines[1].startswith("  trained [MASK] 1: ") and lines[2].startswith("  untrained [MASK] 1: ")
    assert len(lines[1].split("  ")) == 1 + 3  # the indent, then three "token probability" predictions


def test_under_torchrun_only_process_zero_builds_the_vocabulary(tmp_path, monkeypatch):
    """Other processes wait for process 0's vocab.txt instead of training their own."""
    import threading

    from bertedu.training.pretrain import prepare_vocab

    monkeypatch.setenv("RANK", "1")
    cfg = PretrainConfig(preset="tiny", steps=1, out=str(tmp_path))
    writer = threading.Timer(0.5, lambda: (tmp_path / "vocab.txt").write_text("[PAD]\n[UNK]\n"))
    writer.start()
    assert prepare_vocab(cfg, corpus=None, out=tmp_path) == tmp_path / "vocab.txt"  # corpus never read
    writer.join()


def test_without_nsp_only_the_masked_lm_trains(tmp_path):
    out = tmp_path / "mlm-only"
    assert main(["pretrain", "--preset", "tiny", "--steps", "3", "--batch-size", "4", "--out", str(out), "--no-nsp",
                 "--precision", "bf16", "--save-every", "1", "--keep-checkpoints", "3", *SMALL,
                 "--max-eval-examples", "8"]) == 0
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert all(r.get("nsp_loss") is None and r["loss"] == r["mlm_loss"] for r in records if "loss" in r)
    final = [r for r in records if "eval_loss" in r][-1]
    assert "eval_nsp_accuracy" not in final and final["eval_mlm_accuracy"] >= 0.0
    first, last = (load_file(str(out / f"checkpoint-{s}" / "model.safetensors")) for s in (1, 3))
    assert torch.equal(first["nsp.classifier.weight"], last["nsp.classifier.weight"])  # no gradient reached it
    assert not torch.equal(first["mlm.dense.weight"], last["mlm.dense.weight"])
    assert json.loads((out / "run.json").read_text())["nsp"] is False


def test_count_baselines_score_the_runs_own_held_out_masks(tiny_run, tmp_path):
    from bertedu.course.ngram import count_baselines

    vocab = str(tiny_run / "vocab.txt")
    cfg = PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=24, vocab=vocab, max_seq_length=64, steps=1)
    scores = count_baselines(cfg)
    assert scores["training_tokens"] > 1000 and scores["heldout_predictions"] > 50
    assert 0 < scores["unigram"] < scores["left+right"] < 1
    # text whose every word fixes its neighbours: both neighbours give (almost) every masked word
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(["the war was in the north of the city .\nit was a long and cold war ."] * 60) + "\n")
    scores = count_baselines(PretrainConfig(preset="tiny", corpus=str(corpus), vocab=vocab, max_seq_length=32, steps=1))
    assert scores["left+right"] > 0.7 and scores["unigram"] < 0.3
    with pytest.raises(SettingError, match="needs --vocab"):
        count_baselines(PretrainConfig(preset="tiny", corpus="wiki-en", steps=1))


def test_a_run_exports_as_a_shipped_masked_lm(tiny_run, tmp_path):
    from bertedu.pretrained import WeightsIntegrityError, load_masked_lm_folder, run_trained_length, trained_length
    from bertedu.training.ship import ship_pretrain_run

    folder = ship_pretrain_run(tiny_run, tmp_path / "course-test", "bertedu pretrain --preset tiny ...")
    assert "bertedu pretrain --preset tiny ..." in (folder / "COMMAND.md").read_text()
    length = json.loads((tiny_run / "run.json").read_text())["max_seq_length"]
    assert json.loads((folder / "run.json").read_text())["trained_length"] == length
    assert trained_length(folder) == length  # what fill-mask and finetune --init warn past
    # a longer phase 2 from it has trained the longer length; a shorter one keeps the first's
    assert run_trained_length({"max_seq_length": 2 * length, "init_from": str(folder)}) == 2 * length
    assert run_trained_length({"max_seq_length": length // 2, "init_from": str(folder)}) == length
    shipped, tokenizer = load_masked_lm_folder(folder)
    trained, _ = load_pretrained(tiny_run)
    text = "the war was in the [MASK] ."
    assert fill_mask(shipped, tokenizer, text) == fill_mask(trained, tokenizer, text)  # the same weights
    weights = folder / "model.safetensors"
    weights.write_bytes(weights.read_bytes()[:-1] + bytes([weights.read_bytes()[-1] ^ 0xFF]))
    with pytest.raises(WeightsIntegrityError, match="sha256"):
        load_masked_lm_folder(folder)

    # fp16: half the bytes, loaded back as fp32 weights within fp16's rounding of the trained ones
    half = ship_pretrain_run(tiny_run, tmp_path / "course-half", "bertedu pretrain ...", half=True)
    assert "--half" in (half / "COMMAND.md").read_text()
    assert (half / "model.safetensors").stat().st_size < 0.55 * (folder / "model.safetensors").stat().st_size
    halved, _ = load_masked_lm_folder(half)
    for (name, p), (_, q) in zip(halved.named_parameters(), trained.named_parameters()):
        assert p.dtype == torch.float32 and torch.allclose(p, q, rtol=1e-3, atol=1e-4), name


def test_extra_corpus_adds_training_text_only(tiny_run, tmp_path):
    """--extra-corpus: more training examples, the very same held-out examples and masks."""
    from bertedu.data.corpora import load_corpus
    from bertedu.training.pretrain import build_datasets
    from bertedu.data.tokenizer import load_vocab_tokenizer

    extra = tmp_path / "extra.txt"
    extra.write_text("The river flows north to the sea.\nBoats carry grain along it.\n\n"
                     "A second document has two sentences.\nThis is the second one.\n", encoding="utf-8")
    tokenizer = load_vocab_tokenizer(tiny_run / "vocab.txt", impl="fast")
    base = dict(preset="tiny", corpus="wiki-en", max_documents=24, max_seq_length=64, steps=1, out=str(tmp_path / "x"))
    plain_train, plain_held = build_datasets(PretrainConfig(**base), load_corpus("wiki-en"), tokenizer, tmp_path)
    more_train, more_held = build_datasets(PretrainConfig(**base, extra_corpus=f"{extra}, {extra}"),
                                           load_corpus("wiki-en"), tokenizer, tmp_path)
    assert len(more_train) >= len(plain_train) + 2  # two copies of two documents
    assert len(more_held) == len(plain_held) > 0
    for i in range(len(plain_held)):  # the same held-out examples, with the same masks
        a, b = plain_held[i], more_held[i]
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ValueError, match="stream"):
        PretrainConfig(**base, extra_corpus=str(extra), stream=True)
    assert main(["pretrain", "--preset", "tiny", "--steps", "1", "--extra-corpus", "no-such-corpus",
                 "--out", str(tmp_path / "bad"), *SMALL]) == 2
