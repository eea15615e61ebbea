"""`bertedu predict`, `bertedu evaluate` and what `bertedu fill-mask` now refuses.

Predictions are checked against the model itself (its logits' softmax for the text, encoded
independently), not only for their shape."""

import io
import json

import pytest
import torch

from bertedu.cli import main
from bertedu.training.finetune import load_finetuned
from tiny_runs import TAGS, TOPICS, finetune_run, pretrain_run


def _lines(text: str) -> list[dict]:
    return [json.loads(line) for line in text.splitlines()]


def test_classification_gives_the_input_the_label_and_the_models_probabilities(tmp_path, capsys):
    run = finetune_run(tmp_path / "run", "classification")
    texts = ["the film was good", "北京是中国的首都"]
    assert main(["predict", str(run), *texts]) == 0
    rows = _lines(capsys.readouterr().out)
    model, tokenizer, _ = load_finetuned(run)
    for text, row in zip(texts, rows):
        enc = tokenizer.encode(text)
        with torch.no_grad():
            probs = model(torch.tensor([enc.input_ids]), torch.tensor([enc.token_type_ids])).logits[0].softmax(-1)
        assert row["input"] == {"text": text}
        assert list(row["probabilities"]) == TOPICS and row["prediction"] == TOPICS[int(probs.argmax())]
        assert [round(p, 6) for p in probs.tolist()] == list(row["probabilities"].values())


def test_pairs_and_questions_are_split_at_the_tab_and_a_line_without_one_is_refused(tmp_path, capsys):
    pair = finetune_run(tmp_path / "pair", "pair-classification")
    assert main(["predict", str(pair), "he loved it\tshe loved it"]) == 0
    (row,) = _lines(capsys.readouterr().out)
    assert row["input"] == {"text": "he loved it", "text_pair": "she loved it"}
    assert abs(sum(row["probabilities"].values()) - 1) < 1e-5
    assert main(["predict", str(pair), "no tab here"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "no TAB" in err and "first sentence<TAB>second sentence" in err


def test_tagging_gives_a_tag_and_its_probability_per_word(tmp_path, capsys):
    run = finetune_run(tmp_path / "run", "tagging")
    assert main(["predict", str(run), "John lives in New York.", "北京是中国的首都"]) == 0
    english, chinese = _lines(capsys.readouterr().out)
    assert english["words"] == ["John", "lives", "in", "New", "York", "."]
    assert chinese["words"] == list("北京是中国的首都")  # one character per word, as the Chinese tasks are tagged
    for row in (english, chinese):
        assert len(row["prediction"]) == len(row["probabilities"]) == len(row["words"])
        assert set(row["prediction"]) <= set(TAGS) and all(1 / len(TAGS) <= p <= 1 for p in row["probabilities"])
    crf = finetune_run(tmp_path / "crf", "tagging", head="crf")
    assert main(["predict", str(crf), "John lives in New York."]) == 0
    (row,) = _lines(capsys.readouterr().out)
    assert len(row["prediction"]) == 6 and row["probabilities"] is None  # a Viterbi path: no per-word softmax


def test_qa_gives_spans_of_the_context_with_scores(tmp_path, capsys):
    run = finetune_run(tmp_path / "run", "qa")
    context = "John lives in New York. He loved every minute of the film, and the film was good."
    assert main(["predict", str(run), "--top-k", "4", f"who lives in New York?\t{context}"]) == 0
    (row,) = _lines(capsys.readouterr().out)
    assert row["input"] == {"question": "who lives in New York?", "context": context}
    answers = row["answers"]
    assert 1 <= len(answers) <= 4 and row["prediction"] == answers[0]["text"]
    assert all(context[a["start"]:a["end"]] == a["text"] for a in answers)
    assert [a["score"] for a in answers] == sorted((a["score"] for a in answers), reverse=True)
    assert abs(sum(a["probability"] for a in answers) - 1) < 1e-4


def test_inputs_from_a_file_or_stdin_and_output_to_a_file(tmp_path, capsys, monkeypatch):
    run = finetune_run(tmp_path / "run", "classification")
    inputs = tmp_path / "in.txt"
    inputs.write_text("the film was good\n\nthe film was bad\n", encoding="utf-8")
    assert main(["predict", str(run), "--file", str(inputs), "--out", str(tmp_path / "out.jsonl")]) == 0
    assert capsys.readouterr().out == ""
    rows = _lines((tmp_path / "out.jsonl").read_text(encoding="utf-8"))
    assert [r["input"]["text"] for r in rows] == ["the film was good", "the film was bad"]  # blank lines skipped
    monkeypatch.setattr("sys.stdin", io.StringIO("the film was good\n"))
    assert main(["predict", str(run), "--file", "-"]) == 0
    assert _lines(capsys.readouterr().out) == rows[:1]


@pytest.mark.parametrize("args, message", [
    (["--file", "missing.txt"], "no such file"),
    ([], "nothing to predict"),
    (["x", "--file", "in.txt"], "not both"),
])
def test_predict_mistakes_are_one_line(tmp_path, capsys, args, message, monkeypatch):
    monkeypatch.chdir(tmp_path)
    run = finetune_run(tmp_path / "run", "classification")
    (tmp_path / "in.txt").write_text("a\n")
    assert main(["predict", str(run), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and message in err


def test_predict_on_a_masked_lm_points_to_fill_mask(capsys):
    assert main(["predict", "course-en", "a text"]) == 2
    assert "use `bertedu fill-mask`" in capsys.readouterr().err


def _sst_folder(folder):
    folder.mkdir()
    rows = [("the film was good", "person"), ("a dog", "animal"), ("bread and fish", "food"), ("he lives", "person")]
    for split in ("train", "dev", "test"):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    return folder


def test_evaluate_scores_a_saved_run_as_finetune_would(tmp_path, capsys):
    from bertedu.data.task_data import load_task
    from bertedu.training.inference import RunSettings, run_io
    from bertedu.training.taskio import predict

    data = _sst_folder(tmp_path / "data")
    run = finetune_run(tmp_path / "run", "classification", task=str(data))
    assert main(["evaluate", str(run)]) == 0
    printed = json.loads(capsys.readouterr().out)
    model, tokenizer, info = load_finetuned(run)
    task = load_task(str(data))
    io_ = run_io(info, tokenizer, RunSettings(64), task)
    expected = io_.score(task.test, predict(model, io_, task.test)[0])
    assert printed["metrics"] == expected and printed["examples"] == 4 and printed["split"] == "test"
    assert main(["evaluate", str(run), "--task", "ner-en"]) == 2
    assert "is a tagging task" in capsys.readouterr().err


def test_fill_mask_refuses_what_has_no_trained_mlm_head_and_names_the_shipped_models(tmp_path, capsys):
    cases = [(["minilm"], "minilm has no MLM head: use minilm-mlm"),
             (["course-em"], "did you mean course-en"),
             ([str(pretrain_run(tmp_path / "student", distilled_from="minilm"))], "MLM head was never trained"),
             ([str(finetune_run(tmp_path / "ft", "classification"))], "use `bertedu predict")]
    for args, message in cases:
        for command in ("fill-mask", "masked-accuracy"):
            assert main([command, *args] + (["the [MASK] ."] if command == "fill-mask" else [])) == 2
            err = capsys.readouterr().err.strip()
            assert err.count("\n") == 0 and message in err, (command, err)
    assert main(["fill-mask", str(pretrain_run(tmp_path / "pretrained")), "the [MASK] ."]) == 0  # a trained head
    capsys.readouterr()
    untouched = pretrain_run(tmp_path / "untouched", trained_head=False)  # a run.json, but a head at its init values
    assert main(["fill-mask", str(untouched), "the [MASK] ."]) == 2
    assert "LayerNorm still holds its initial values" in capsys.readouterr().err


def _finetuned(tmp_path, task: str, **settings):
    from bertedu.training.finetune import FinetuneConfig, finetune
    from tiny_runs import write_vocab

    vocab = write_vocab(tmp_path / "vocab")
    out = tmp_path / "run"
    quick = dict(init="random", preset="tiny", vocab=str(vocab), steps=2, batch_size=4,
                 max_seq_length=32, progress=False, log_every=1)
    return out, finetune(FinetuneConfig(task=task, out=str(out), **{**quick, **settings}))


def test_finetune_writes_the_input_and_scores_and_evaluate_reproduces_its_results(tmp_path, capsys):
    data = _sst_folder(tmp_path / "data")
    out, results = _finetuned(tmp_path, str(data))
    for split in ("dev", "test"):
        rows = _lines((out / f"predictions_{split}.jsonl").read_text(encoding="utf-8"))
        assert [r["input"]["text"] for r in rows] == ["the film was good", "a dog", "bread and fish", "he lives"]
        for r in rows:
            assert r["prediction"] == max(r["scores"], key=r["scores"].get)
            assert abs(sum(r["scores"].values()) - 1) < 1e-5
        assert main(["evaluate", str(out), "--split", split]) == 0
        assert json.loads(capsys.readouterr().out)["metrics"] == results[split]  # the saved best weights' scores
    assert main(["predict", str(out), "the film was good"]) == 0
    (row,) = _lines(capsys.readouterr().out)
    assert row["probabilities"] == _lines((out / "predictions_test.jsonl").read_text())[0]["scores"]


@pytest.mark.slow
@pytest.mark.parametrize("task, settings", [
    ("ner-en", dict(max_train=8, max_eval=4)),
    ("qa-cloze-en", dict(max_train=8, max_eval=4, max_seq_length=64, doc_stride=32, max_query_length=24)),
])
def test_tagging_and_qa_runs_end_to_end(tmp_path, capsys, task, settings):
    """A real tiny run of each: its predictions file carries the input and scores, evaluate with
    the run's --max-eval reproduces its test metrics, and the export matches bertedu."""
    out, results = _finetuned(tmp_path, task, **settings)
    rows = _lines((out / "predictions_test.jsonl").read_text(encoding="utf-8"))
    if task == "ner-en":
        assert all(len(r["input"]["words"]) == len(r["prediction"]) == len(r["scores"]) for r in rows)
    else:
        assert all(r["input"]["context"][r["scores"]["start"]:r["scores"]["end"]] == r["prediction"] for r in rows)
    assert main(["evaluate", str(out), "--max-eval", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] == results["test"]
    assert main(["export", str(out), str(tmp_path / "hf")]) == 0
    assert max(json.loads(capsys.readouterr().out)["checked"].values()) <= 1e-4


# ---- issue 60 case 2: evaluate scores the run's own sets, and --max-eval limits any split --------------
def _topics_folder(folder, n=20):
    folder.mkdir()
    words = {"animal": ["a dog", "the fox", "a lazy dog"], "food": ["bread", "fish and bread", "the bread"],
             "person": ["he lives", "she loved it", "john lives"]}
    rows = [(f"{text} {i}", label) for i in range(n) for label, texts in words.items() for text in texts[i % 3:][:1]]
    for split in ("train", "dev", "test"):
        (folder / f"{split}.jsonl").write_text("".join(json.dumps({"text": t, "label": y}) + "\n" for t, y in rows))
    return folder


def test_evaluate_scores_the_runs_own_evaluation_set_and_honours_max_eval_on_every_split(tmp_path, capsys):
    """A run made with --max-train 12 --max-eval 6: `evaluate RUN` scores its 6 test examples (the
    numbers in results.json), not all 60; --max-eval N cuts whichever split is scored, train included."""
    out, results = _finetuned(tmp_path, str(_topics_folder(tmp_path / "data")), max_train=12, max_eval=6)
    assert main(["evaluate", str(out), "--no-progress"]) == 0
    scored = json.loads(capsys.readouterr().out)
    assert scored["examples"] == 6 and scored["metrics"] == results["test"]
    assert main(["evaluate", str(out), "--split", "train", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["examples"] == 12  # the run's own training set
    for split, n in (("train", 5), ("dev", 4), ("test", 60)):
        assert main(["evaluate", str(out), "--split", split, "--max-eval", str(n), "--no-progress"]) == 0
        assert json.loads(capsys.readouterr().out)["examples"] == n, split
    assert main(["evaluate", str(out), "--split", "dev", "--max-eval", "6", "--no-progress"]) == 0
    assert json.loads(capsys.readouterr().out)["metrics"] == results["dev"]  # the same seeded subsample


# ---- issue 60 case 6: inputs of the wrong shape are refused in one line ----------------------------------
@pytest.mark.parametrize("kind, text, says", [
    ("classification", "a man plays\ta man is playing", "holds a TAB, as a sentence pair would"),
    ("pair-classification", "a man\t", "has an empty side of its TAB"),
    ("pair-classification", "\ta man", "has an empty side of its TAB"),
    ("pair-classification", "a\tb\tc", "has 3 TAB-separated parts"),
    ("qa", "who?\tJohn lives here.\tmore", "has 3 TAB-separated parts"),
])
def test_an_input_of_the_wrong_shape_is_one_line(tmp_path, capsys, kind, text, says):
    run = finetune_run(tmp_path / "run", kind)
    assert main(["predict", str(run), text]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and says in err and err.startswith("bertedu predict: error: input 1 ")
