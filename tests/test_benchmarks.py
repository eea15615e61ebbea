"""benchmarks/: the FLOP count by hand, and benchmarks/gpu.sh end to end on CPU at tiny size."""

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from bertedu import BertConfig, BertForPreTraining

REPO = Path(__file__).resolve().parent.parent


def load_bench():
    spec = importlib.util.spec_from_file_location("bench", REPO / "benchmarks" / "bench.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    return bench


bench = load_bench()


def test_flops_by_hand_tiny():
    # tiny: L=2, D=128, I=512, V=30522; two sequences of real lengths 4 and 2, M=3 labels.
    cfg = BertConfig.tiny()
    per_layer = (4 * (128 * 128 + 128)  # query, key, value, output: weights + biases
                 + (128 * 512 + 512) + (512 * 128 + 128)  # feed-forward in and out
                 + 2 * 2 * 128)  # two LayerNorms, weight + bias
    assert per_layer == 198_272
    assert bench.encoder_layer_params(cfg) == 2 * per_layer
    dense = 6 * 396_544 * (4 + 2)  # 14_275_584
    attention = 12 * 2 * 128 * (4 * 4 + 2 * 2)  # 61_440
    mlm_head = 6 * (128 * 128 + 128 * 30522) * 3  # 70_617_600
    assert bench.training_flops(cfg, [4, 2], 3) == dense + attention + mlm_head == 84_954_624


def test_flops_match_the_models_and_the_textbook_formula():
    # N_layers is what the encoder layers really hold, for bertedu's model
    model = BertForPreTraining(BertConfig.tiny())
    assert bench.encoder_layer_params(model.config) == sum(p.numel() for p in model.bert.layers.parameters())
    # BERT-BASE: 85.05M parameters in the encoder layers
    base = BertConfig.base()
    assert bench.encoder_layer_params(base) == 12 * 7_087_872 == 85_054_464
    # a full batch without MLM labels is (6N + 12 L D T) per token, as in Kaplan / PaLM
    B, T = 3, 128
    n = bench.encoder_layer_params(base)
    assert bench.training_flops(base, [T] * B, 0) == (6 * n + 12 * 12 * 768 * T) * B * T
    # MFU of a made-up row: 1e15 FLOPs in 2 s on a 1e15 FLOP/s peak is 50%
    row = dict(real_tokens=1000, padded_tokens=1280, step_s=2.0, flops_per_step=1e15)
    bench.finish_row(row, peak=1e15)
    assert row["mfu"] == pytest.approx(0.5)
    assert row["tokens_per_s"] == 500 and row["padded_tokens_per_s"] == 640


@pytest.mark.parametrize("name, peak", [
    ("NVIDIA H100 80GB HBM3", 989e12), ("NVIDIA H200", 989e12), ("NVIDIA GH200 480GB", 989e12),
    ("NVIDIA H100 PCIe", 756e12), ("NVIDIA H100 NVL", 835e12), ("NVIDIA H20", 148e12),
    ("NVIDIA A100-SXM4-80GB", 312e12), ("NVIDIA A10", 125e12),
    ("NVIDIA L40", 181e12), ("NVIDIA L40S", 362e12), ("NVIDIA L4", 121e12),  # an L40 is not an L4
    ("Some Future GPU", None),
])
def test_peak_flops_by_device_name(name, peak):
    assert bench.peak_flops(name) == peak


def test_batches():
    cfg = BertConfig.tiny()
    lengths = bench.ragged_lengths(64, 128, 0.25, seed=1)
    assert int(lengths.min()) >= 32 and int(lengths.max()) <= 128
    batch = bench.make_batch(cfg, 64, 128, lengths=lengths)
    stats = bench.batch_stats(batch)
    assert stats["real_tokens"] == int(lengths.sum()) and stats["padded_tokens"] == 64 * 128
    assert 0.25 < stats["padding_fraction"] < 0.5  # uniform on [T/4, T]: 37.5% expected
    labelled = batch["labels"] != -100
    assert not (labelled & (batch["attention_mask"] == 0)).any()  # labels only on real tokens
    assert 0.10 < labelled.sum() / batch["attention_mask"].sum() < 0.20  # ~15%
    assert torch.equal(batch["labels"][labelled], batch["input_ids"][labelled])


@pytest.mark.slow
def test_gpu_script_end_to_end_on_cpu(tmp_path):
    """The GPU script's whole path (both passes, padding rows, compile, the merged table) at tiny size."""
    env = dict(os.environ, PYTHON=sys.executable, BENCH_DEVICE="cpu", BENCH_PRESETS="tiny",
               BENCH_SEQ_LENS="32", BENCH_STEPS="1", BENCH_WARMUP="0", BENCH_BATCH_SIZE="4",
               BENCH_THREADS="1", BENCH_COMPILE="1", BENCH_COMPILE_BACKEND="eager",
               BENCH_OUT_DIR=str(tmp_path), HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1")
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu.sh")], env=env, capture_output=True,
                          text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]

    eager = json.loads((tmp_path / "gpu_eager.json").read_text())
    compiled = json.loads((tmp_path / "gpu_compiled.json").read_text())
    variants = ["transformers", "readable", "sdpa", "fast"]
    assert [r["variant"] for r in eager["rows"]] == variants
    assert [r["variant"] for r in eager["padding"]] == ["transformers", "fast"]
    assert [(r["variant"], r["compiled"]) for r in compiled["rows"]] == [("transformers", True), ("fast", True)]
    assert eager["meta"]["adamw"]["fused"] is True  # fused AdamW runs on CPU in this PyTorch
    for r in eager["rows"] + eager["padding"] + compiled["rows"]:
        assert r["step_s"] > 0 and r["tokens_per_s"] > 0 and r["act_bytes"] > 0
        assert r["ratio"] > 0 and r["mfu"] is None  # no MFU without a GPU peak
        # same weights, same batch, dropout off: every variant's loss is transformers'
        assert r["loss_diff"] < 1e-4, r
    full = bench.batch_stats(bench.make_batch(BertConfig.tiny(), 4, 32, seed=0))  # the script's batch
    for r in eager["rows"]:
        assert r["real_tokens"] == r["padded_tokens"] == 4 * 32
        assert r["flops_per_step"] == bench.training_flops(BertConfig.tiny(), [32] * 4, full["labelled"])
    for r in eager["padding"]:
        assert 0 < r["padding_fraction"] < 1 and r["real_tokens"] < r["padded_tokens"]
    # the sparse MLM head keeps no (B, T, V) logits for backward
    rows = {r["variant"]: r for r in eager["rows"]}
    assert rows["fast"]["act_bytes"] < rows["transformers"]["act_bytes"] / 2

    # the table comes last, with every row of both passes
    lines = proc.stdout.strip().splitlines()
    assert lines[-1].startswith("act MiB:")
    table = lines[lines.index(next(x for x in lines if x.startswith("training step"))):]
    for v in variants:
        assert any(x.startswith("tiny") and f" {v} " in x for x in table), v
    assert any("transformers+c" in x for x in table)
    assert any(x.startswith("padding:") for x in table)



@pytest.mark.slow
def test_distill_speed_script_times_teacher_student_and_transformers(tmp_path):
    """benchmarks/distill_speed.py end to end at its smallest: every model timed, ratios formed."""
    out = tmp_path / "speed.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "distill_speed.py"), "--threads", "1",
                           "--batch-sizes", "2", "--length", "16", "--repeats", "1", "--json", str(out)],
                          capture_output=True, text=True, timeout=300, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert proc.returncode == 0, proc.stderr[-2000:]
    result = json.loads(out.read_text())
    assert result["parameters"]["teacher"] == 22_713_216 == result["parameters"]["transformers teacher"]
    row = result["rows"][0]
    assert row["batch"] == 2 and row["length"] == 16
    # the ratio is formed before the times are rounded to 10 µs: equal up to that rounding
    assert row["student / teacher"] == pytest.approx(row["student s"] / row["teacher s"], abs=0.01)
    assert "| 1 | 2 × 16 |" in proc.stdout


def test_distill_table_reads_finished_runs_and_scores_the_split_asked_for(tmp_path):
    """benchmarks/distill_table.py: runs with a results.json are read, not repeated; --split dev gives dev scores
    (for choosing a recipe), the default gives test scores, and "kept" is the student's mean over the teacher's."""
    scores = {"teacher": ([0.50, 0.48], [0.44, 0.42]), "student": ([0.45, 0.47], [0.40, 0.41])}
    for kind, (dev, test) in scores.items():
        for seed, (d, t) in enumerate(zip(dev, test)):
            run = tmp_path / f"ner-en-{kind}-{seed}"
            run.mkdir()
            (run / "results.json").write_text(json.dumps({"main_metric": "f1", "dev": {"f1": d}, "test": {"f1": t}}))
    command = [sys.executable, str(REPO / "benchmarks" / "distill_table.py"), "--student", "runs/never-run",
               "--tasks", "ner-en", "--seeds", "0,1", "--out", str(tmp_path)]
    for split, row in (("dev", "| ner-en | 0.490 ± 0.014 (0.500, 0.480) | 0.460 ± 0.014 (0.450, 0.470) | **93.9%** |"),
                       ("test", "| ner-en | 0.430 ± 0.014 (0.440, 0.420) | 0.405 ± 0.007 (0.400, 0.410) | **94.2%** |")):
        proc = subprocess.run(command + (["--split", split] if split == "dev" else []), capture_output=True, text=True,
                              timeout=120)
        assert proc.returncode == 0, proc.stderr[-2000:]
        assert f"{split} scores" in proc.stdout and row in proc.stdout, proc.stdout
        assert "bertedu finetune" not in proc.stdout  # nothing was run


@pytest.mark.slow
def test_plateau_cross_tables_score_a_run_on_both_kinds_of_held_out_example(tmp_path, monkeypatch, capsys):
    import runpy

    from bertedu.cli import main

    run = tmp_path / "run"
    assert main(["pretrain", "--preset", "tiny", "--steps", "2", "--batch-size", "4", "--corpus", "wiki-en",
                 "--max-documents", "30", "--vocab-size", "600", "--no-progress", "--max-seq-length", "48",
                 "--no-nsp", "--max-eval-examples", "16", "--out", str(run)]) == 0
    capsys.readouterr()

    def plateau(*args) -> tuple[str, str, str]:  # the script, run as `python benchmarks/plateau.py ARGS` is
        monkeypatch.setattr(sys, "argv", ["plateau.py", *args])
        runpy.run_path(str(REPO / "benchmarks" / "plateau.py"), run_name="__main__")
        header, rule, row = capsys.readouterr().out.strip().splitlines()
        return header, rule, row

    for flag, columns in [("--cross-packing", "sentence-pair examples | held-out MLM acc., FULL-SENTENCES blocks"),
                          ("--cross-masks", "token masks | held-out MLM acc., whole-word masks")]:
        header, rule, row = plateau(flag, str(run))
        assert columns in header and rule == "|---|--:|--:|"
        scores = [float(x) for x in row.strip("| ").split(" | ")[1:]]
        assert row.startswith("| run |") and len(scores) == 2 and all(0 <= s <= 1 for s in scores)
    header, rule, row = plateau("--held-out-as", "whole_word=true", "packing=full-sentences", "--", str(run))
    assert "with whole_word=true packing=full-sentences" in header and rule == "|---|--:|"
    assert row.startswith("| run |") and 0 <= float(row.strip("| ").split(" | ")[1]) <= 1
    header, rule, row = plateau("--words", str(run))
    assert "per word, whole-word masks" in header and rule.count("--:") == 6
    cells = row.strip("| ").split(" | ")
    assert cells[0] == "run" and int(cells[1].replace(",", "")) <= 600 and float(cells[2]) >= 1.0
    word_accuracy, words = cells[5].replace("*", "").split()
    assert 0 <= float(word_accuracy) <= 1 and int(words.strip("()").replace(",", "")) > 0


def test_plateau_groups_masked_pieces_into_words():
    sys.path.insert(0, str(REPO / "benchmarks"))
    from plateau import masked_words

    class Pieces:
        tokens = ["[PAD]", "the", "un", "##do", "##ing", "cat", "##s"]

        def convert_ids_to_tokens(self, i):
            return self.tokens[i]

    # "the undoing cats": un ##do ##ing masked together, then cat ##s; an unmasked gap splits words
    assert masked_words([-100, 1, 2, 3, 4, -100, 5, 6], Pieces()) == [[1], [2, 3, 4], [6, 7]]
    assert masked_words([2, 5, -100, 6], Pieces()) == [[0], [1], [3]]  # a lone ## piece is a word of its own


@pytest.mark.slow
def test_gpu_minilm_mlm_script_end_to_end_on_cpu(tmp_path):
    """benchmarks/gpu_minilm_mlm.sh (minilm-mlm's long schedule for a lent GPU, `bertedu pretrain`'s
    minilm-mlm recipe), two steps on the CPU; started again, it continues the run (here: already done)."""
    out = tmp_path / "run"
    from bertedu.utils import cpu_has_bf16

    # four sequences a step (the recipe's 32 cost the test seconds, and show nothing more); bf16 where the CPU
    # has it, else fp32 (emulated bf16 costs minutes a step)
    env = dict(os.environ, MLM_DEVICE="cpu", MLM_STEPS="2", MLM_BATCH_SIZE="4", MLM_EVAL_SEQUENCES="4",
               MLM_MEASURE_SEQUENCES="8", MLM_OUT=str(out), PYTHON=sys.executable, HF_HUB_OFFLINE="1",
               TRANSFORMERS_OFFLINE="1", MLM_PRECISION="bf16" if cpu_has_bf16() else "fp32")
    proc = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_minilm_mlm.sh")], env=env, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    assert [r["step"] for r in records if "eval_mlm_accuracy" in r] == [1, 2]
    config = json.loads((out / "run.json").read_text())
    assert config["device"] == "cpu" and config["corpus"] == "wiki-en" and config["lr"] == 5e-4
    assert config["batch_size"] == 4  # the recipe's 32 when MLM_BATCH_SIZE is unset
    assert config["init_from"] == "minilm" and config["head_lr"] == 3e-3 and config["packing"] == "documents"
    lines = proc.stdout.strip().splitlines()
    assert "training exited with status 0" in proc.stdout
    assert any(line.startswith("held-out, the first 8 sequences: accuracy") for line in lines)
    assert any(line.startswith("probes: ") for line in lines) and any(line.startswith("pairs: ") for line in lines)
    assert lines[-3].split() == ["step", "minutes", "held-out", "acc", "held-out", "loss"]  # the table comes last
    assert [int(line.split()[0]) for line in lines[-2:]] == [1, 2]
    weights = (out / "checkpoint-2" / "model.safetensors").read_bytes()
    again = subprocess.run(["bash", str(REPO / "benchmarks" / "gpu_minilm_mlm.sh")], env=env, capture_output=True,
                           text=True, timeout=300)  # a second lent session continues the run (here: already done)
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    assert again.stdout.startswith("continuing the run in") and "training exited with status 0" in again.stdout
    assert [r["step"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
            if "eval_mlm_accuracy" in r] == [1, 2]
    assert (out / "checkpoint-2" / "model.safetensors").read_bytes() == weights

@pytest.mark.slow
def test_finetune_forgetting_and_crf_gap_scripts_run_end_to_end(tmp_path):
    """The two fine-tuning studies docs/finetuning.md offers, each cut to a couple of steps: their tables and
    records come out, with the fields the docs and notebook 09 read."""
    quick = ["--extra", "--steps 2 --max-train 32 --max-eval 16", "--seeds", "0", "--threads", "1"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    record = tmp_path / "forgetting.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "finetune_forgetting.py"), "--task", "topic-en",
                           "--lrs", "1e-4", "--sequences", "4", "--out", str(tmp_path / "f"), "--json", str(record),
                           *quick], capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| 1e-4 |" in proc.stdout.splitlines()[-1]
    forgetting = json.loads(record.read_text())
    assert 0 <= forgetting["masked_accuracy_before"] <= 1 and len(forgetting["by_lr"]["1e-4"]["masked_accuracy"]) == 1
    record = tmp_path / "crf.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "crf_gap.py"), "--tasks", "ner-zh",
                           "--out", str(tmp_path / "c"), "--json", str(record), *quick],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    entry = json.loads(record.read_text())["course-zh/ner-zh"]
    assert [len(entry[head]) for head in ("softmax", "crf")] == [1, 1] and entry["crf"][0]["invalid_sequences"] == 0
    assert "f1_gap" in entry["summary"] and "CRF - softmax" in proc.stdout


@pytest.mark.slow
def test_elmo_weights_script_writes_a_folder_load_elmo_reads(tmp_path):
    """benchmarks/elmo_weights.py (notebook 17's shipped ELMo-style model) cut to 2 steps: the folder loads with
    the notebook's vocabulary and that recipe, and its run.json names the command and the machine."""
    from bertedu.course import lm_study

    out = tmp_path / "elmo-study"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elmo_weights.py"), "--out", str(out), "--steps", "2"],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = lm_study.study_tokenizer(lm_study.study_text()[0], tmp_path / "vocab.txt")
    model, run = lm_study.load_elmo(study, lm_study.study_recipe(steps=2, seed=0, kind="elmo"), out)
    assert run.step == 2 and run.tokens_seen == 2 * 32 * 32
    shipped = json.loads((out / "run.json").read_text())
    assert shipped["command"] == f"python benchmarks/elmo_weights.py --out {out} --steps 2"
    assert "torch" in shipped["machine"] and shipped["machine"].endswith("2 threads")
    assert f"{out}: elmo model, 2 steps" in proc.stdout
    bert_out = tmp_path / "lm-study-bert"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elmo_weights.py"), "--kind", "bert", "--out",
                           str(bert_out), "--steps", "2"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    model, run = lm_study.load_lm("bert", study, lm_study.study_recipe(steps=2, seed=0, kind="bert"), bert_out)
    assert run.step == 2 and json.loads((bert_out / "manifest.json").read_text())["kind"] == "BertForMaskedLM"


@pytest.mark.slow
def test_elmo_study_script_runs_end_to_end(tmp_path):
    """benchmarks/elmo_study.py (notebook 17's three models over seeds) cut to 2 steps and two seeds: the
    record holds every field notebook 17 reads, the same tokens for all three models, and the tables print."""
    record = tmp_path / "elmo.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "elmo_study.py"), "--seeds", "0,1", "--steps", "2",
                           "--threads", "1", "--json", str(record)],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = json.loads(record.read_text())
    assert study["steps"] == 2 and study["vocab_size"] == 2000 and study["sentences"] == 132
    assert list(study["by_seed"]) == ["0", "1"]
    for run in study["by_seed"].values():
        assert run["tokens_seen"] == 2 * 32 * 32
        assert set(run["accuracy"]) == {"BERT, both sides", "GPT, left side", "ELMo-style, both sides",
                                        "ELMo-style, left LM", "ELMo-style, right LM", "bigram, left piece",
                                        "bigram, both neighbours", "always 'the'"}
        assert all(0 <= a <= 1 for a in run["accuracy"].values())
        assert all(len(v) == 2 and v[1] >= 0 for v in run["differences"].values())
        assert {w for m in run["probe"].values() for w in m} == {"may", "left"}
        assert all(1 <= rank <= 35 for m in run["probe"].values() for _, rank in m.values())
    assert study["command"].startswith("python benchmarks/elmo_study.py --seeds 0,1 --steps 2")
    assert "| ELMo-style, both sides |" in proc.stdout and "| ELMo-style | may |" in proc.stdout


@pytest.mark.slow
def test_qa_recipe_script_varies_dropout_and_frozen_layers(tmp_path, monkeypatch, capsys):
    """benchmarks/qa_recipe.py (notebook 11's recipe, RESULTS.md's commands) cut to one step and 4 questions
    per split: a row per configuration, the dropout and frozen-layer fields read and recorded (none: the
    encoder's own dropout, nothing frozen)."""
    import runpy

    record = tmp_path / "rows.json"
    monkeypatch.setattr(sys, "argv", ["qa_recipe.py", "--configs", "8:8:5e-4:0:2,8:8:5e-4", "--threads", "1",
                                      "--json", str(record)])
    recipe = runpy.run_path(str(REPO / "benchmarks" / "qa_recipe.py"))  # its functions, not yet run
    recipe["NOTEBOOK_11_CPU"]["max_eval"] = 4
    recipe["main"]()
    rows = json.loads(record.read_text())
    assert [row["dropout"] for row in rows] == [0.0, None]
    assert [row["freeze_layers"] for row in rows] == [2, 0]
    assert all(row["steps"] == 1 and row["windows"] >= 8 for row in rows)
    table = capsys.readouterr().out.splitlines()
    assert table[2].startswith("| 8 | 8 | 0.0005 | 0 | 2 |") and table[3].startswith("| 8 | 8 | 0.0005 | 0.1 (own) | 0 |")


@pytest.mark.slow
def test_finetune_advice_script_and_chinese_forgetting_run_end_to_end(tmp_path):
    """finetune_advice.py (both studies) and finetune_forgetting.py --task ner-zh (course-zh under its own
    MLM head, on the documents its pretraining held out), cut to 2 steps: their tables and records come
    out with the fields docs/finetuning.md and notebook 08 read."""
    quick = ["--extra", "--steps 2 --max-train 32 --max-eval 16", "--seeds", "0", "--threads", "1",
             "--sequences", "4"]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    record = tmp_path / "forgetting.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "finetune_forgetting.py"), "--task", "ner-zh",
                           "--lrs", "1e-3", "--out", str(tmp_path / "f"), "--json", str(record), *quick],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    forgetting = json.loads(record.read_text())
    assert forgetting["init"] == "course-zh" and 0 < forgetting["masked_accuracy_before"] < 1
    record = tmp_path / "advice.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "finetune_advice.py"), "--task", "ner-zh",
                           "--out", str(tmp_path / "f"), "--json", str(record), *quick],
                          capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "| freeze lower half |" in proc.stdout and "| dropout 0.3 |" in proc.stdout
    entry = json.loads(record.read_text())["ner-zh"]
    plain = entry["rate"]["variants"]["plain"]
    assert plain["task"] == forgetting["by_lr"]["1e-3"]["task"]  # the sweep's runs, read back, not repeated
    assert proc.stdout.count("bertedu finetune") == 3 + 4  # one seed; the plain rows were not run again
    for row in entry["overfit"]["variants"].values():
        assert len(row["train_last"]) == len(row["curves"]) == 1 and all(0 <= x <= 1 for x in row["train_last"])
        assert row["curves"][0]["step"][-1] == 2 and len(row["curves"][0]["train_loss"]) == len(row["curves"][0]["step"])


def test_cpu_rounding_script_hashes_one_product_the_same_way_twice(monkeypatch, capsys):
    """benchmarks/cpu_rounding.py (RESULTS.md: stored outputs on CPUs of different makes): the machine line names
    the CPU, and one process hashes the same seeded product alike every time (a different seed: other bits)."""
    import runpy

    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    script = runpy.run_path(str(REPO / "benchmarks" / "cpu_rounding.py"))
    digest, ms = script["product_hash"]()
    assert len(digest) == 16 and int(digest, 16) >= 0 and ms > 0
    assert script["product_hash"]()[0] == digest != script["product_hash"](seed=1)[0]
    script["main"]()
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"machine: {script['machine']()}") and f"sha256 {digest}," in out[1]


@pytest.mark.slow
def test_finetune_gap_script_records_both_twins(tmp_path, monkeypatch, capsys):
    """benchmarks/finetune_gap.py (the records notebooks 08, 10 and 11 read, bertedu/weights/finetune_gap.json),
    one seed on 16 definitions: the pretrained run and its random twin of the same preset and vocabulary, run in
    this process; the table, and a record whose commands name the vocabulary, not this machine's path."""
    import runpy

    record_path, extra = tmp_path / "gap.json", "--max-train 16 --max-eval 8 --epochs 1 --batch-size 8 --max-seq-length 16"
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    monkeypatch.setattr(sys, "argv", ["finetune_gap.py", "--init", "course-en", "--tasks", "topic-en", "--seeds", "0",
                                      "--threads", "1", "--out", str(tmp_path / "runs"), "--json", str(record_path),
                                      "--extra", extra])
    runpy.run_path(str(REPO / "benchmarks" / "finetune_gap.py"), run_name="__main__")
    entry = json.loads(record_path.read_text())["course-en/topic-en"]
    assert entry["seeds"] == [0] and len(entry["pretrained"]) == len(entry["random"]) == 1
    assert all(0 <= x <= 1 for x in entry["pretrained"] + entry["random"]) and entry["metric"] == "test accuracy"
    assert entry["commands"]["random"].startswith("bertedu finetune --task topic-en --init random --preset ")
    assert "--vocab COURSE_EN_VOCAB --max-train 600" in entry["commands"]["random"]
    assert entry["commands"]["pretrained"].endswith(f"{extra} --seed SEED") and str(tmp_path) not in json.dumps(entry["commands"])
    assert entry["command"].startswith("python benchmarks/finetune_gap.py --init course-en --tasks topic-en --seeds 0")
    for kind in ("pretrained", "random"):
        results = json.loads((tmp_path / "runs" / f"topic-en-{kind}-0" / "results.json").read_text())
        assert results["test"]["accuracy"] == entry[kind][0] and results["train_examples"] == 16
    assert "| topic-en |" in capsys.readouterr().out


def test_recipe_compare_record_is_paired_at_equal_flops():
    """bertedu/weights/recipe_compare.json (docs/gpu_route.md, benchmarks/RESULTS.md): both arms
    of each seed spent the same training FLOPs (within 2%: the last batch overshoots the token
    budget), and the stored comparison is the one its per-seed rows give."""
    from bertedu.course.stats import compare

    record = json.loads((REPO / "bertedu/weights/recipe_compare.json").read_text())
    rows = {(r["arm"], r["seed"]): r for r in record["rows"]}
    assert sorted(record["seeds"]) == [0, 1, 2] and len(rows) == 6
    for seed in record["seeds"]:
        bert, budget = rows["bert", seed], rows["budget", seed]
        assert budget["train_flops"] == pytest.approx(bert["train_flops"], rel=0.02)
        assert "--no-nsp" in budget["command"] and "--mlm-probability 0.3" in budget["command"]
        assert "--no-nsp" not in bert["command"] and "--mlm-probability" not in bert["command"]
    accuracy = {arm: [rows[arm, s]["heldout_accuracy"] for s in record["seeds"]] for arm in ("budget", "bert")}
    result = compare(accuracy["budget"], accuracy["bert"])
    assert record["comparison"]["difference"] == pytest.approx(result.difference)
    assert record["comparison"]["standard_error"] == pytest.approx(result.se)
    baseline = record["most_frequent_piece"]  # scored on the same held-out masks as every row
    assert all(r["heldout_tokens"] == baseline["tokens"] for r in record["rows"])


@pytest.mark.slow
def test_plateau_climb_script_records_each_checkpoint_split_by_what_the_input_shows(tmp_path):
    """benchmarks/plateau_climb.py (notebook 06's record of the climb past the plateau) cut to 40 steps
    stopped at 20: one entry per checkpoint, accuracies in [0, 1], the probes filled, the command kept."""
    record = tmp_path / "climb.json"
    proc = subprocess.run([sys.executable, str(REPO / "benchmarks" / "plateau_climb.py"), "--steps", "40", "--stop-at",
                           "20", "--eval-every", "10", "--eval-sequences", "32", "--threads", "1",
                           "--out", str(tmp_path / "run"), "--json", str(record)],
                          capture_output=True, text=True, env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    climb = json.loads(record.read_text())
    assert climb["command"].startswith("OMP_NUM_THREADS=1 python benchmarks/plateau_climb.py --steps 40 --stop-at 20")
    assert climb["settings"]["steps"] == 40 and climb["seed"] == 0
    steps = climb["steps"]
    assert [s["step"] for s in steps] == [10, 20]
    for s in steps:
        assert 0 <= s["accuracy_mask"] <= 1 and 0 <= s["accuracy_unchanged"] <= 1
        assert s["loss_mask_minus_unigram_se"] > 0 and abs(s["loss_mask"] - s["loss_mask_minus_unigram"]) > 0
        assert s["probes"] and all(len(top) == 5 for top in s["probes"].values())


def test_lr_study_arms_merge_into_the_record_and_seed_agreement_keeps_predictions(tmp_path, monkeypatch):
    """benchmarks/lr_study.py --arms runs only the named arms and merges them into the task's existing entry
    (notebook 10's record keeps its older arms); benchmarks/seed_agreement.py (notebook 08's record) keeps each
    seed's test predictions beside its accuracy. Both on a few examples, one step."""
    import runpy

    extra = "--max-train 16 --max-eval 8 --epochs 1 --batch-size 16 --max-seq-length 16"
    monkeypatch.syspath_prepend(str(REPO / "benchmarks"))
    record_path = tmp_path / "lr.json"
    record_path.write_text(json.dumps({"paraphrase-en": {"task": "paraphrase-en", "command": "older", "arms": {
        "high": {"flags": "--lr 3e-4 --epochs 1", "test": [0.5]}}}}))
    monkeypatch.setattr(sys, "argv", ["lr_study.py", "--tasks", "paraphrase-en", "--arms", "high-long", "--seeds", "0",
                                      "--threads", "1", "--out", str(tmp_path / "runs"), "--json", str(record_path),
                                      "--extra", extra])
    runpy.run_path(str(REPO / "benchmarks" / "lr_study.py"), run_name="__main__")
    entry = json.loads(record_path.read_text())["paraphrase-en"]
    assert set(entry["arms"]) == {"high", "high-long"} and entry["command"] == "older"  # the older arm is kept
    arm = entry["arms"]["high-long"]
    assert arm["flags"] == "--lr 3e-4 --epochs 6" and len(arm["test"]) == len(arm["train_loss_curves"]) == 1
    assert arm["command"].startswith("python benchmarks/lr_study.py --tasks paraphrase-en --arms high-long")

    agree_path = tmp_path / "agree.json"
    monkeypatch.setattr(sys, "argv", ["seed_agreement.py", "--seeds", "0,1", "--threads", "1", "--out",
                                      str(tmp_path / "agree"), "--json", str(agree_path), "--extra", extra])
    runpy.run_path(str(REPO / "benchmarks" / "seed_agreement.py"), run_name="__main__")
    agree = json.loads(agree_path.read_text())["minilm/topic-en"]
    assert agree["seeds"] == [0, 1] and len(agree["predictions"]) == 2 and len(agree["ids"]) == 8
    for preds, acc in zip(agree["predictions"], agree["test_accuracy"]):
        assert sum(p == g for p, g in zip(preds, agree["gold"])) / len(preds) == acc
