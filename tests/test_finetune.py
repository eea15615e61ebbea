"""Fine-tuning end to end (bertedu.training.finetune) and the `bertedu finetune` command line.

Runs are tiny (a few steps, subsampled data, the tiny preset where the encoder may be
random) so the file stays within seconds on a 2-core CPU; what is checked is that each
task family trains, is scored with its own metric, writes its predictions and results,
and that early stopping and best-weight selection do what they say.
"""

import itertools
import json
import random

import pytest
import torch
from safetensors.torch import load_file

from bertedu.training.checkpoint import latest_checkpoint
from bertedu.cli import build_parser, main
from bertedu.data.task_data import TASKS
from bertedu.training.finetune import (
    ClassificationIO,
    FinetuneConfig,
    finetune,
    load_finetuned,
    predict,
    task_io,
)
from bertedu.training.pretrain import PretrainConfig, pretrain
from bertedu.pretrained import minilm_vocab_path

POSITIVE = ["a wonderful , moving film", "great acting and a fine story", "i loved every minute of it",
            "a delightful and charming comedy", "brilliant , funny and warm", "an excellent movie"]
NEGATIVE = ["a dull , boring mess", "terrible acting and a weak story", "i hated every minute of it",
            "an awful and tedious film", "stupid , ugly and cold", "a horrible movie"]
QUICK = dict(batch_size=8, max_seq_length=32, progress=False, log_every=1)


def _rows(n: int, rng: random.Random) -> list[tuple[str, int]]:
    return [(rng.choice(POSITIVE if i % 2 else NEGATIVE), i % 2) for i in range(n)]


@pytest.fixture(scope="module")
def sst_dir(tmp_path_factory):
    """A small data set in the GLUE SST-2 format; its test file has no labels, as GLUE's."""
    folder = tmp_path_factory.mktemp("sst2")
    rng = random.Random(0)
    (folder / "train.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in _rows(48, rng)))
    (folder / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{s}\t{y}\n" for s, y in _rows(16, rng)))
    (folder / "test.tsv").write_text("index\tsentence\n" + "".join(f"{i}\t{s}\n" for i, (s, _) in
                                                                   enumerate(_rows(8, rng))))
    return folder


@pytest.fixture(scope="module")
def small_vocab(tmp_path_factory):
    """A vocabulary of the SST words above: a random model with it trains much faster
    than with MiniLM's 30,522 pieces (the embedding matrix dominates a tiny model)."""
    from bertedu.data.tokenizer import SPECIAL_TOKENS

    words = sorted({w for s in POSITIVE + NEGATIVE for w in s.split()})
    path = tmp_path_factory.mktemp("vocab") / "vocab.txt"
    path.write_text("\n".join([*SPECIAL_TOKENS, *words]) + "\n")
    return path


@pytest.fixture(scope="module")
def pretrain_dir(tmp_path_factory):
    out = tmp_path_factory.mktemp("pretrained")
    pretrain(PretrainConfig(preset="tiny", corpus="wiki-en", max_documents=20, vocab_size=1000, steps=2,
                            batch_size=4, max_seq_length=64, max_eval_examples=8, out=str(out), progress=False))
    return out


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def test_help_lists_every_task_and_explains_every_flag(capsys):
    try:  # from the stored help (training/cli_flags.py) main returns 0; from argparse's parser it exits 0
        code = main(["finetune", "--help"])
    except SystemExit as stop:
        code = stop.code
    assert code in (0, None)
    text = " ".join(capsys.readouterr().out.split())  # argparse wraps lines
    for task in TASKS:
        assert task in text
    for field in FinetuneConfig.__dataclass_fields__:
        assert "--" + field.replace("_", "-") in text
    assert "finetune" in build_parser().format_help()


def test_qa_answers_are_spans_of_the_original_context_across_windows():
    from bertedu.model.config import BertConfig
    from bertedu.data.formats import QAExample, TaskData
    from bertedu.model.tasks import BertForQuestionAnswering
    from bertedu.data.tokenizer import load_vocab_tokenizer

    context = ("Zoë Müller was born in Zürich in 1901. " * 3) + "She moved to Paris in 1925 and wrote novels there."
    examples = [QAExample(qid, question, context, [{"text": answer, "answer_start": context.index(answer)}])
                for qid, question, answer in [("q1", "Where did she move?", "Paris"),
                                              ("q2", "When was she born?", "1901")]]
    task = TaskData("toy-qa", "qa", [], examples, examples, [])
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    io = task_io(task, tokenizer, FinetuneConfig(task="squad", max_seq_length=24, doc_stride=8, max_answer_length=4))
    windows = io.encode(examples)
    assert len(windows) > 2 * len(examples)  # the context does not fit one window
    model = BertForQuestionAnswering(BertConfig.tiny(vocab_size=len(tokenizer)))
    preds, loss = predict(model, io, examples, batch_size=4, items=windows)
    assert loss > 0 and all(p and p in context for p in preds)  # cut out of the original text (accents kept)
    assert all(len(p.split()) <= 4 for p in preds)  # at most max_answer_length tokens


@pytest.mark.slow
def test_classification_from_minilm_on_the_command_line(sst_dir, tmp_path, capsys):
    out = tmp_path / "run"
    argv = ["finetune", "--task", str(sst_dir), "--init", "minilm", "--out", str(out), "--steps", "3",
            "--batch-size", "8", "--max-seq-length", "32", "--lr", "1e-4", "--no-progress"]
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert "accuracy" in printed and "dev" in printed and "hidden" in printed  # GLUE-style test: dev only

    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "classification" and results["steps"] == 3
    assert results["dev"]["accuracy"] >= 0.75  # two classes: chance is 0.5
    assert results["test"] is None and "hidden" in results["note"]
    dev = _jsonl(out / "predictions_dev.jsonl")
    assert len(dev) == 16 and all(r["prediction"] in ("negative", "positive") for r in dev)
    assert sum(r["prediction"] == r["gold"] for r in dev) / 16 == pytest.approx(results["dev"]["accuracy"])
    test = _jsonl(out / "predictions_test.jsonl")
    assert len(test) == 8 and all(r["gold"] is None for r in test)
    # The saved model is the one that was scored: reloading it gives the same predictions.
    model, tokenizer, info = load_finetuned(out)
    from bertedu.data.files import load_path

    task = load_path(sst_dir)
    cfg = FinetuneConfig(task=str(sst_dir), max_seq_length=info["max_seq_length"])
    preds, loss = predict(model, task_io(task, tokenizer, cfg), task.dev)
    assert preds == [r["prediction"] for r in dev] and loss > 0


def test_tagging_from_random_init_gives_entity_metrics(tmp_path):
    out = tmp_path / "ner"
    results = finetune(FinetuneConfig(task="ner-en", init="random", preset="tiny", out=str(out), steps=4,
                                      max_train=32, max_eval=16, **QUICK))
    assert results["kind"] == "tagging" and results["init"] == "random"
    for split in ("dev", "test"):
        assert set(results[split]) >= {"precision", "recall", "f1", "per_type"}
        assert all(0.0 <= results[split][k] <= 1.0 for k in ("precision", "recall", "f1"))
    rows = _jsonl(out / "predictions_dev.jsonl")
    assert len(rows) == 16 and all(len(r["prediction"]) == len(r["gold"]) for r in rows)  # one tag per word
    assert (out / "vocab.txt").read_text() == minilm_vocab_path().read_text()  # English: MiniLM's vocabulary


@pytest.mark.slow
def test_qa_with_a_sliding_window_gives_squad_scores(pretrain_dir, tmp_path):
    out = tmp_path / "qa"
    results = finetune(FinetuneConfig(task="qa-cloze-en", init="random", preset="tiny", out=str(out), steps=2,
                                      vocab=str(pretrain_dir / "vocab.txt"),
                                      max_train=8, max_eval=4, batch_size=8, max_seq_length=64, doc_stride=32,
                                      max_query_length=24, progress=False))
    assert results["kind"] == "qa"
    assert results["train_features"] > results["train_examples"]  # contexts longer than a window
    for split in ("dev", "test"):
        assert set(results[split]) == {"exact_match", "f1"}
        assert 0.0 <= results[split]["exact_match"] <= results[split]["f1"] <= 100.0
    rows = _jsonl(out / "predictions_dev.jsonl")
    assert len(rows) == 4 and all(isinstance(r["prediction"], str) and r["gold"] for r in rows)
    assert all(len(r["prediction"].split()) <= 30 for r in rows)  # max_answer_length tokens at most


def test_init_from_a_pretraining_run_with_a_frozen_encoder(sst_dir, pretrain_dir, tmp_path):
    out = tmp_path / "from-pretrain"
    results = finetune(FinetuneConfig(task=str(sst_dir), init=str(pretrain_dir), out=str(out), steps=3,
                                      freeze_encoder=True, **QUICK))
    assert results["lr"] == 1e-3  # the default for a frozen encoder: only the head learns
    assert (out / "vocab.txt").read_text() == (pretrain_dir / "vocab.txt").read_text()
    pretrained = load_file(str(latest_checkpoint(pretrain_dir) / "model.safetensors"))
    tuned = load_file(str(out / "model" / "model.safetensors"))
    encoder = [k for k in tuned if k.startswith("bert.")]
    assert encoder and all(torch.equal(tuned[k], pretrained[k]) for k in encoder)  # frozen: unchanged
    info = json.loads((out / "model" / "task.json").read_text())
    assert info["head"] == {"num_labels": 2, "pooling": "mean"}  # sentence-BERT style features


def test_random_init_for_chinese_builds_a_character_vocabulary(tmp_path):
    out = tmp_path / "zh"
    results = finetune(FinetuneConfig(task="sentiment-zh", init="random", preset="tiny", out=str(out), steps=2,
                                      max_train=32, max_eval=8, **QUICK))
    vocab = (out / "vocab.txt").read_text(encoding="utf-8").splitlines()
    assert vocab[:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"] and len(vocab) < 2000
    assert "的" in vocab  # the commonest Chinese character, one token
    assert 0.0 <= results["dev"]["accuracy"] <= 1.0 and 0.0 <= results["test"]["f1"] <= 1.0


def test_the_random_init_vocabulary_of_a_tagging_task_and_by_a_models_name(tmp_path):
    from bertedu.data.task_data import load_task
    from bertedu.data.vocab import build_char_vocab
    from bertedu.pretrained import masked_lm_vocab_path
    from bertedu.training.finetune import _random_init_vocab

    task = load_task("ner-zh", max_train=300, max_eval=10)
    built = _random_init_vocab(FinetuneConfig(task="ner-zh", init="random", out=str(tmp_path)), task, tmp_path)
    expected = build_char_vocab([[" ".join(e.tokens)] for e in task.train], tmp_path / "expected.txt", min_count=2)
    assert built.read_text(encoding="utf-8") == expected.read_text(encoding="utf-8")  # characters seen twice
    for name, path in (("course-zh", masked_lm_vocab_path("course-zh")), ("minilm", minilm_vocab_path())):
        cfg = FinetuneConfig(task="ner-zh", init="random", vocab=name, out=str(tmp_path))
        assert _random_init_vocab(cfg, task, tmp_path) == path  # a model's name: its vocabulary


@pytest.mark.slow
def test_early_stopping_keeps_the_best_weights(sst_dir, small_vocab, tmp_path, monkeypatch):
    # Scripted dev scores: best at the 2nd evaluation, then two without improvement
    # (an equal score is no improvement).
    scores = itertools.chain([0.5, 0.9, 0.6, 0.9], itertools.repeat(0.0))
    monkeypatch.setattr(ClassificationIO, "score", lambda self, examples, preds: {"accuracy": next(scores)})
    common = dict(task=str(sst_dir), init="random", preset="tiny", vocab=str(small_vocab), lr=1e-3, **QUICK)
    out = tmp_path / "early"
    results = finetune(FinetuneConfig(out=str(out), steps=12, eval_every=1, patience=2, **common))
    assert results["stopped_early"] and results["steps"] == 4 and results["best_step"] == 2
    assert [e["step"] for e in results["evaluations"]] == [1, 2, 3, 4]
    assert latest_checkpoint(out).name == "checkpoint-4"
    # The weights kept are those after step 2: a run that stops there has the same ones
    # (same seed; the chunked run resumes exactly, and the schedule is the 12-step one).
    again = tmp_path / "two-steps"
    monkeypatch.setattr(ClassificationIO, "score", lambda self, examples, preds: {"accuracy": 0.5})
    finetune(FinetuneConfig(out=str(again), steps=12, eval_every=2, patience=1, **common))
    kept, reference = load_file(str(out / "model" / "model.safetensors")), load_file(
        str(again / "model" / "model.safetensors"))
    last = load_file(str(latest_checkpoint(out) / "model.safetensors"))
    assert all(torch.equal(kept[k], reference[k]) for k in kept)
    assert not all(torch.equal(kept[k], last[k]) for k in kept)  # the last weights were not kept


def test_errors_say_what_to_fix(sst_dir, tmp_path, capsys):
    with pytest.raises(ValueError, match="unknown task 'nope'.*sentiment-zh"):
        FinetuneConfig(task="nope")
    assert main(["finetune", "--task", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown task" in capsys.readouterr().err
    with pytest.raises(ValueError, match="give a task"):
        FinetuneConfig()
    empty = tmp_path / "not-a-run"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        finetune(FinetuneConfig(task=str(sst_dir), init=str(empty), out=str(tmp_path / "y"), steps=1, **QUICK))
    with pytest.raises(ValueError, match="not a folder"):
        FinetuneConfig(task=str(sst_dir), init=str(tmp_path / "missing"))
    with pytest.raises(ValueError, match="random only"):
        FinetuneConfig(task=str(sst_dir), init="minilm", vocab="vocab.txt")


def test_sentence_pairs_with_three_labels_and_an_extra_dev_split(small_vocab, tmp_path, capsys):
    # MNLI's layout: dev_matched is the dev set, dev_mismatched an extra evaluation set.
    folder = tmp_path / "mnli"
    folder.mkdir()
    rng = random.Random(1)
    labels = ["contradiction", "entailment", "neutral"]

    def write(name: str, n: int) -> None:
        rows = [f"{rng.choice(POSITIVE)}\t{rng.choice(NEGATIVE)}\t{labels[i % 3]}\n" for i in range(n)]
        (folder / name).write_text("sentence1\tsentence2\tgold_label\n" + "".join(rows))

    write("train.tsv", 24)
    write("dev_matched.tsv", 9)
    write("dev_mismatched.tsv", 6)
    out = tmp_path / "run"
    assert main(["finetune", "--task", str(folder), "--init", "random", "--preset", "tiny", "--vocab",
                 str(small_vocab), "--out", str(out), "--steps", "2", "--batch-size", "8", "--no-progress"]) == 0
    printed = capsys.readouterr().out
    assert "dev_mismatched" in printed and "no test split" in printed
    results = json.loads((out / "results.json").read_text())
    assert results["kind"] == "pair-classification" and results["test"] is None
    rows = _jsonl(out / "predictions_dev_mismatched.jsonl")
    assert len(rows) == 6 and all(r["prediction"] in labels for r in rows)
    scored = sum(r["prediction"] == r["gold"] for r in rows) / 6
    assert results["extra"]["dev_mismatched"]["accuracy"] == pytest.approx(scored)
    assert 0.0 <= results["extra"]["dev_mismatched"]["f1"] <= 1.0  # macro F1 over three labels
