"""The GPU route of docs/gpu_route.md (issue 52): its commands parse into valid configs, the
gpu-scale init of notebooks 08-11 says which model it used, the FLOP count of the recipe
comparison is the formula's, and the 10-minute rehearsal runs end to end on the CPU."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path

import pytest

from bertedu.cli import _config_from_args, build_parser
from bertedu.model.config import BertConfig
from bertedu.training.finetune import FinetuneConfig, gpu_scale_init
from bertedu.training.pretrain import BUDGET_RECIPE, PretrainConfig

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))


def route_commands() -> list[list[str]]:
    """Every `bertedu pretrain|finetune` command of docs/gpu_route.md's commands section, with its
    shell variables filled in and line continuations joined."""
    text = (ROOT / "docs/gpu_route.md").read_text()
    block = text.split("## 2. The commands", 1)[1].split("```bash", 1)[1].split("```", 1)[0]
    block = block.replace("\\\n", " ")
    variables = dict(re.findall(r'^(\w+)="?([^"#\n]*?)"?\s*(?:#.*)?$', block, flags=re.M))
    commands = []
    for line in block.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith("bertedu pretrain") or line.startswith("bertedu finetune"):
            for name, value in variables.items():
                line = line.replace(f"${name}", value)
            commands.append(shlex.split(line)[1:])
    return commands


def test_the_route_commands_are_valid_configs_with_a_real_streamed_corpus():
    commands = route_commands()
    kinds = [c[0] for c in commands]
    assert kinds == ["pretrain", "pretrain", "finetune", "finetune", "finetune", "finetune"]
    parser = build_parser()
    phase1, phase2 = (_config_from_args(PretrainConfig, parser.parse_args(c)) for c in commands[:2])
    for cfg in (phase1, phase2):
        assert cfg.preset == "base" and cfg.stream and cfg.num_workers >= 1 and cfg.corpus != "wiki-en"
        assert not cfg.nsp
        assert cfg.mlm_probability == BUDGET_RECIPE["mlm_probability"]
    assert (phase1.max_seq_length, phase2.max_seq_length) == (128, 512) and phase2.init_from == phase1.out
    for flag in BUDGET_RECIPE["streamed_flags"]:
        assert all(flag in command for command in commands[:2])
    assert 0.85 < phase1.time_budget / (phase1.time_budget + phase2.time_budget) < 0.95  # BERT's 90/10 split
    tasks = []
    for command in commands[2:]:
        args = parser.parse_args(command)
        assert args.init == phase2.out  # every fine-tune starts from the phase-2 run
        tasks.append(args.task)
    assert tasks == ["sst2", "mrpc", "conll2003", "squad"]


def test_gpu_scale_init_names_a_finished_run_or_falls_back_to_minilm(tmp_path):
    assert gpu_scale_init({}) == ("minilm", "init: minilm ($BERTEDU_PRETRAINED is not set)")
    run = tmp_path / "phase2"
    run.mkdir()
    init, said = gpu_scale_init({"BERTEDU_PRETRAINED": str(run)})
    assert init == "minilm" and "phase2 holds no finished pretraining run" in said
    (run / "checkpoint-200").mkdir()
    assert gpu_scale_init({"BERTEDU_PRETRAINED": str(run)})[0] == "minilm"  # no vocab.txt yet
    (run / "vocab.txt").write_text("[PAD]\n")
    init, said = gpu_scale_init({"BERTEDU_PRETRAINED": str(run)})
    assert init == str(run) and said == "init: the pretraining run in phase2 ($BERTEDU_PRETRAINED)"
    assert str(tmp_path) not in said  # no machine path in a notebook's output
    FinetuneConfig(task="sst2", init=init, out="unused")  # a valid init for the notebooks' SETTINGS


def test_the_comparison_counts_flops_by_the_formula():
    from recipe_compare import train_flops_per_token

    c = BertConfig.base()
    L, D, I, V, T = c.num_hidden_layers, c.hidden_size, c.intermediate_size, c.vocab_size, 128
    N = L * (4 * D * D + 2 * D * I)  # the encoder's matrix weights
    for p in (0.15, 0.30):
        expected = 6 * N + 12 * L * T * D + 6 * p * (D * D + D * V)  # 6N + 12LTD + the sparse MLM head
        assert train_flops_per_token(c, T, p) == pytest.approx(expected)
    assert round(train_flops_per_token(c, T, 0.15) / 1e6) == 545  # docs/gpu_route.md's table


@pytest.mark.slow
def test_the_rehearsal_runs_the_whole_route_on_the_cpu(tmp_path, capsys):
    import gpu_route

    row = gpu_route.main(["--smoke", "--out", str(tmp_path)])
    table = capsys.readouterr().out.rsplit("$ bertedu", 1)[1].split("\n", 1)[1]
    assert row["steps"] == 3 and row["tokens_per_s"] > 0 and row["mfu"] is None
    assert 0 <= row["heldout_accuracy"] <= 1 and row["data_ms"] > 0
    assert set(row["finetune"]) == set(gpu_route.TASKS)
    for name in ("tokens per second", "MFU", "data / step", "held-out masked-token accuracy",
                 "topic-en", "paraphrase-en", "ner-en", "qa-cloze-en"):
        assert name in table
    assert (tmp_path / "phase2" / "vocab.txt").is_file()  # the run folder stays for the fine-tunes


def test_the_budget_is_counted_in_tokens_by_the_route_formula():
    from recipe_compare import train_flops_per_token as compared

    from bertedu.course.flops import budget_tokens, train_flops_per_token

    base = BertConfig.base()
    for T, p in ((128, 0.15), (128, 0.3), (512, 0.3)):
        assert train_flops_per_token(base, T, p) == pytest.approx(compared(base, T, p))
    # docs/gpu_route.md's table: one H100 SXM second at 30% MFU buys 523,000 tokens at 128, 30% masked
    assert round(budget_tokens(base, 1, 128, 0.3), -3) == 523_000
    assert round(budget_tokens(base, 1, 512, 0.3), -3) == 487_000
    assert budget_tokens(base, 3600, 128, 0.3, mfu=0.4) == pytest.approx(4 / 3 * budget_tokens(base, 3600, 128, 0.3),
                                                                         rel=1e-6)


def test_the_plateau_check_passes_a_model_that_reads_and_refuses_one_that_does_not():
    import torch

    from bertedu import BertForPreTraining
    from bertedu.pretrained import load_masked_lm
    from bertedu.training.heldout import StillOnPlateauError, check_past_plateau

    reader, tokenizer = load_masked_lm("course-en")  # trained far past the plateau
    judged = check_past_plateau(reader, tokenizer, "course-en", max_sequences=64)
    assert judged["difference"] < -judged["critical"] * judged["se"] < 0 and judged["sequences"] >= 30
    assert judged["loss_mask"] == pytest.approx(judged["losses"]["model"].mean().item())
    stats = pytest.importorskip("scipy.stats")
    assert judged["critical"] == pytest.approx(stats.t.ppf(0.975, judged["sequences"] - 1), abs=1e-3)  # Student's t
    torch.manual_seed(0)
    fresh = BertForPreTraining(reader.config)
    with pytest.raises(StillOnPlateauError, match="has not got past the unigram plateau.*BERTEDU_PRETRAINED"):
        check_past_plateau(fresh, tokenizer, "a fresh model", max_sequences=64)
    with pytest.raises(ValueError, match="too few"):
        check_past_plateau(reader, tokenizer, "course-en", max_sequences=8)
