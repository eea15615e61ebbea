"""The command line is generated from the config dataclasses: what --help says is the code's defaults."""

import argparse
import dataclasses
import json

import pytest

from bertedu.cli import build_parser, main
from bertedu.training.finetune import FinetuneConfig
from bertedu.training.pretrain import PretrainConfig
from bertedu.training.loop import TrainConfig


def subparser(name: str) -> argparse.ArgumentParser:
    sub = next(a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices[name]


@pytest.mark.parametrize("command, cls", [("pretrain", PretrainConfig), ("finetune", FinetuneConfig)])
def test_every_field_is_a_flag_whose_help_shows_the_code_default(command, cls):
    parser = subparser(command)
    formatter = parser._get_formatter()
    actions = {a.dest: a for a in parser._actions}
    for field in dataclasses.fields(cls):
        action = actions[field.name]
        assert action.default == field.default, field.name
        shown = formatter._expand_help(action)  # the text `--help` prints for this flag
        assert shown.startswith(field.metadata["help"].replace("%%", "%")), field.name
        assert shown.endswith(f"(default: {field.default})"), (field.name, shown)


@pytest.mark.parametrize("cls", [PretrainConfig, FinetuneConfig])
def test_the_commands_configs_extend_the_loops_config_without_redeclaring_it(cls):
    loop = {f.name: f.type for f in dataclasses.fields(TrainConfig)}
    own = {f.name: f.type for f in dataclasses.fields(cls)}
    assert issubclass(cls, TrainConfig) and set(loop) <= set(own)


def test_flags_parse_to_the_config_types():
    args = build_parser().parse_args(["pretrain", "--steps", "3", "--time-budget", "45m", "--betas", "0.8", "0.9",
                                      "--no-unpad", "--keep-checkpoints", "2"])
    assert (args.steps, args.time_budget, args.betas, args.unpad, args.keep_checkpoints) == (3, 2700.0, [0.8, 0.9],
                                                                                             False, 2)


def test_a_subclass_config_converts_to_the_loops_config_field_by_field():
    cfg = PretrainConfig(steps=5, lr=3e-4, keep_checkpoints=3, seed=11)
    loop = cfg.train_config(out="x")
    assert type(loop) is TrainConfig
    assert (loop.steps, loop.lr, loop.keep_checkpoints, loop.seed, loop.out) == (5, 3e-4, 3, 11, "x")


def test_only_finetuning_may_leave_the_learning_rate_to_be_chosen():
    with pytest.raises(ValueError, match="lr must be positive"):
        TrainConfig(lr=None, steps=1)
    with pytest.raises(ValueError, match="lr must be positive"):
        PretrainConfig(lr=None, steps=1)
    assert FinetuneConfig(task="ner-en", lr=None).resolved_lr() == 5e-5
    with pytest.raises(ValueError, match="lr must be positive"):
        FinetuneConfig(task="ner-en", lr=0.0)


def test_a_stage_says_what_it_made_on_stderr_only(capsys, monkeypatch):
    from bertedu.training.progress import PROGRESS_ENV, stage

    monkeypatch.setenv(PROGRESS_ENV, "1")
    with stage("tokenising x", True) as made:
        made["examples"] = 12345
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert out == "" and lines[0] == "bertedu: tokenising x ..."
    assert lines[1].startswith("bertedu: tokenising x: 12,345 examples in ") and lines[1].endswith(" s")
    for enabled, env in ((False, "1"), (True, "0")):  # --no-progress, or BERTEDU_PROGRESS=0
        monkeypatch.setenv(PROGRESS_ENV, env)
        with stage("tokenising x", enabled):
            pass
        assert capsys.readouterr() == ("", "")


def test_progress_goes_to_stderr_and_leaves_the_results_alone(capsys, monkeypatch):
    """masked-accuracy with its progress lines (forced, as on a terminal) and without: the same stdout."""
    from bertedu.training.progress import PROGRESS_ENV

    monkeypatch.setenv(PROGRESS_ENV, "1")
    args = ["masked-accuracy", "course-en", "--max-sequences", "4"]
    assert main(args) == 0
    shown = capsys.readouterr()
    assert main([*args, "--no-progress"]) == 0
    quiet = capsys.readouterr()
    assert shown.out == quiet.out and json.loads(quiet.out)["tokens"] > 0
    assert quiet.err == "" and "bertedu: scoring course-en on wiki-en's held-out documents: in " in shown.err


def test_top_level_help_lists_every_command_without_importing_torch():
    """`bertedu --help` answers without torch (issue 53 item 6), and lists exactly the commands the
    full parser has, with the same one-line help."""
    import subprocess
    import sys

    code = ("import sys\nfrom bertedu.cli import main\nassert main(['--help']) == 0\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    from bertedu.cli import COMMAND_HELP, build_parser

    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {c.dest: c.help for c in sub._choices_actions} == COMMAND_HELP
    for name, text in COMMAND_HELP.items():
        assert " ".join(text.split()[:3]) in " ".join(proc.stdout.split()), name
