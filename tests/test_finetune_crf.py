"""`bertedu finetune --head crf`: BERT+CRF tagging on the command line, saved, reloaded and
decoded with Viterbi under the BIO constraints; its misuses are one-line errors.

The run is tiny (the tiny preset from random weights, 32 training tweets of ner-en, 4
steps): what is checked is the plumbing (the CRF's own learning rate, the saved head, the
reload, the decoding), not the F1, which benchmarks/crf_gap.py measures.
"""

import json

import pytest
import torch

from bertedu.cli import main
from bertedu.data.task_data import load_task
from bertedu.training.finetune import load_finetuned, predict, task_io, FinetuneConfig
from bertedu.training.metrics import stray_inside_tags
from conftest import tiny_sentence_task

RUN = ["--task", "ner-en", "--init", "random", "--preset", "tiny", "--max-train", "32", "--max-eval", "16",
       "--steps", "4", "--eval-every", "2", "--batch-size", "8", "--max-seq-length", "32", "--lr", "1e-4",
       "--no-progress"]


def _jsonl(path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture(scope="module")
def crf_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("crf") / "run"
    assert main(["finetune", *RUN, "--head", "crf", "--out", str(out)]) == 0
    return out


@pytest.mark.slow
def test_a_crf_run_trains_its_transitions_faster_and_decodes_valid_bio(crf_run):
    results = json.loads((crf_run / "results.json").read_text())
    assert results["crf_lr"] == 1e-2 and results["lr"] == 1e-4 and results["config"]["head"] == "crf"
    for split in ("dev", "test"):
        rows = _jsonl(crf_run / f"predictions_{split}.jsonl")
        assert rows and all(len(r["prediction"]) == len(r["gold"]) for r in rows)
        assert all(stray_inside_tags(r["prediction"]) == 0 for r in rows)  # constrained Viterbi: valid BIO
        assert results[split]["errors"]["invalid_sequences"] == 0
    model, _, info = load_finetuned(crf_run)
    assert info["head"]["head"] == "crf" and model.crf is not None and model.crf.label_names == info["labels"]
    # 4 steps: Adam moves a parameter by at most about its rate per step, so transitions beyond
    # 4 * 1e-4 come from the CRF's own rate, 1e-2
    assert model.crf.transitions.abs().max() > 4 * 1e-4 * 10
    assert torch.isinf(model.crf.transition_constraint).any()  # the BIO constraints, rebuilt from the labels


@pytest.mark.slow
def test_a_reloaded_crf_run_predicts_what_it_wrote(crf_run):
    model, tokenizer, info = load_finetuned(crf_run)
    results = json.loads((crf_run / "results.json").read_text())
    cfg = FinetuneConfig(**{k: v for k, v in results["config"].items()})
    task = load_task("ner-en", seed=cfg.data_seed).subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    io = task_io(task, tokenizer, cfg)
    predictions, loss = predict(model, io, task.test, batch_size=8)
    assert predictions == [r["prediction"] for r in _jsonl(crf_run / "predictions_test.jsonl")]
    assert loss is not None and loss > 0  # the CRF's negative log-likelihood per word
    assert io.score(task.test, predictions) == results["test"]


def _one_line_error(capsys, args: list[str]) -> str:
    assert main(args) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bertedu finetune: error: "), err
    return err[0]


def test_a_crf_head_on_a_task_that_is_not_tagging_is_one_line(capsys, tmp_path):
    sst = tiny_sentence_task(tmp_path / "sst")
    line = _one_line_error(capsys, ["finetune", "--task", sst, "--head", "crf", "--init", "random", "--preset",
                                    "tiny", "--steps", "1", "--no-progress", "--out", str(tmp_path / "o")])
    assert "--head crf decodes tag sequences, for tagging tasks" in line and "classification task" in line


@pytest.mark.parametrize("flags, says", [
    (["--crf-lr", "1e-2"], "--crf-lr is the learning rate of a CRF's transitions: it needs --head crf"),
    (["--head", "crf", "--crf-lr", "0"], "crf_lr must be positive"),
    (["--head", "lstm"], "head must be one of softmax, crf"),
    (["--head", "crf", "--teacher", "."], "drop --teacher or use --head softmax"),
])
def test_crf_settings_that_cannot_work_are_one_line(capsys, flags, says):
    assert says in _one_line_error(capsys, ["finetune", "--task", "ner-en", *flags])


@pytest.mark.slow
def test_a_crf_run_is_no_teacher(capsys, crf_run, tmp_path):
    line = _one_line_error(capsys, ["finetune", *RUN, "--teacher", str(crf_run), "--out", str(tmp_path / "s")])
    assert "tags with a CRF" in line


def test_the_recorded_study_is_what_docs_print():
    """bertedu/weights/crf_gap.json (benchmarks/crf_gap.py) against docs/finetuning.md's table: each
    row's F1 mean ± sd is the record's, recomputed from its per-seed values; the CRF never wrote invalid BIO."""
    import statistics
    from pathlib import Path

    from bertedu.course.stats import compare

    root = Path(__file__).resolve().parent.parent
    record = json.loads((root / "bertedu/weights/crf_gap.json").read_text())
    docs = (root / "docs/finetuning.md").read_text(encoding="utf-8")
    assert set(record) == {"course-zh/ner-zh", "course-en/ner-en"}
    for entry in record.values():
        for row in ("softmax", "softmax_constrained", "crf"):
            f1 = [run["f1"] for run in entry[row]]
            assert len(f1) == 3 and entry["summary"][row]["f1"]["mean"] == pytest.approx(statistics.mean(f1))
            shown = f"{statistics.mean(f1):.3f} ± {statistics.stdev(f1):.3f} ({', '.join(f'{x:.3f}' for x in f1)})"
            assert shown in docs, shown
        assert all(run["invalid_sequences"] == 0 for run in entry["crf"] + entry["softmax_constrained"])
        gap = statistics.mean(c["f1"] - s["f1"] for s, c in zip(entry["softmax"], entry["crf"]))
        seeds = compare([c["f1"] for c in entry["crf"]], [s["f1"] for s in entry["softmax"]])  # the docs' first line
        assert seeds.difference == pytest.approx(gap)
        assert f"{gap:+.3f} ± {seeds.se:.3f} ({abs(seeds.t):.1f} SE)" in docs
