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


# ---- issue 60 case 5: --help without torch, OpenMP threads that wait quietly -------------------------
def test_every_commands_help_answers_without_importing_torch():
    """`bertedu <command> --help` prints the full parser's help (training/cli_flags.py) and never
    imports torch: checked in a fresh process for every command."""
    import subprocess
    import sys

    from bertedu.cli import COMMAND_HELP

    code = ("import contextlib, io, sys\nfrom bertedu.cli import main\n"
            f"for command in {list(COMMAND_HELP)!r}:\n"
            "    with contextlib.redirect_stdout(io.StringIO()) as shown:\n"
            "        try:\n            status = main([command, '--help'])\n"
            "        except SystemExit as stop:\n            status = stop.code\n"
            "    assert status == 0, command\n"
            "    assert f'usage: bertedu {command}' in shown.getvalue(), command\n"
            "assert 'torch' not in sys.modules, 'torch imported'\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_the_help_snapshot_is_current_and_prints_what_the_parser_prints(monkeypatch, capsys):
    """training/cli_flags.py is what `build_parser()` holds now (else: python -m bertedu.cli
    --write-help-snapshot), and the help built from it is the full parser's, character for character."""
    from bertedu.cli import COMMAND_HELP, _help_from_spec, help_sources_sha256, parser_spec
    from bertedu.training import cli_flags

    monkeypatch.setenv("COLUMNS", "100")
    assert cli_flags.SOURCES_SHA256 == help_sources_sha256(), "run: python -m bertedu.cli --write-help-snapshot"
    assert cli_flags.FLAGS == parser_spec(build_parser()), "run: python -m bertedu.cli --write-help-snapshot"
    for command in COMMAND_HELP:
        assert _help_from_spec(command, cli_flags.FLAGS[command]).format_help() == subparser(command).format_help()
        assert main([command, "--task", "x", "--help"] if command == "finetune" else [command, "-h"]) == 0
        assert capsys.readouterr().out == subparser(command).format_help()


def _omp_policy_when_torch_loads(env_value):
    """OMP_WAIT_POLICY as torch found it when `bertedu predict` imported it (an import hook)."""
    import os
    import subprocess
    import sys

    hook = ("import os, sys\nseen = []\n"
            "class Watch:\n"
            "    def find_spec(self, name, path=None, target=None):\n"
            "        if name == 'torch' and not seen:\n"
            "            seen.append(os.environ.get('OMP_WAIT_POLICY'))\n"
            "        return None\n"
            "sys.meta_path.insert(0, Watch())\n"
            "from bertedu.cli import main\n"
            "main(['predict', 'no-such-run', 'a text'])\n"
            "print('policy', seen[0])\n")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    if env_value is not None:
        env["OMP_WAIT_POLICY"] = env_value
    proc = subprocess.run([sys.executable, "-c", hook], capture_output=True, text=True, env=env, timeout=120)
    return proc.stdout.split("policy ")[-1].strip()


def test_the_command_line_sets_a_passive_openmp_wait_before_torch_loads_unless_the_user_chose():
    assert _omp_policy_when_torch_loads(None) == "PASSIVE"
    assert _omp_policy_when_torch_loads("ACTIVE") == "ACTIVE"  # the user's own setting is kept


# ---- issue 60 case 6: pretrain --overwrite, SIGTERM in set-up, the same run gives the same bytes ------
def _tiny_pretrain(tmp_path, out, *more):
    corpus = tmp_path / "six.txt"
    if not corpus.exists():
        corpus.write_text("\n\n".join(f"Document {i} has a sentence.\nAnd another one about rivers and banks."
                                      for i in range(6)) + "\n", encoding="utf-8")
    return main(["pretrain", "--preset", "tiny", "--steps", "2", "--no-progress", "--corpus", str(corpus),
                 "--vocab-size", "80", "--max-seq-length", "32", "--batch-size", "2", "--out", str(out), *more])


def test_pretrain_overwrite_replaces_a_run_as_finetunes_does(tmp_path, capsys, recwarn):
    out = tmp_path / "run"
    assert _tiny_pretrain(tmp_path, out) == 0
    (out / "checkpoint-2" / "marker").write_text("the first run's")
    assert _tiny_pretrain(tmp_path, out) == 2
    assert "--overwrite to replace it" in capsys.readouterr().err
    assert _tiny_pretrain(tmp_path, out, "--overwrite", "--resume") == 2
    assert "give one of them" in capsys.readouterr().err
    assert _tiny_pretrain(tmp_path, out, "--overwrite") == 0
    assert not (out / "checkpoint-2" / "marker").exists() and (out / "checkpoint-2" / "model.safetensors").is_file()


def test_two_identical_runs_write_the_same_bytes(tmp_path, capsys, recwarn):
    """safetensors wrote its metadata keys in hash-map order, another each time: sorted now."""
    import hashlib

    from bertedu.training.checkpoint import save_checkpoint, save_weights
    from bertedu.training.pretrain import load_pretrained
    from tiny_runs import pretrain_run

    def sha(path):
        return hashlib.sha256(path.read_bytes()).hexdigest()

    assert _tiny_pretrain(tmp_path, tmp_path / "a") == 0 and _tiny_pretrain(tmp_path, tmp_path / "b") == 0
    assert sha(tmp_path / "a" / "checkpoint-2" / "model.safetensors") == \
        sha(tmp_path / "b" / "checkpoint-2" / "model.safetensors")
    model, _ = load_pretrained(pretrain_run(tmp_path / "tiny"))
    hashes = set()
    for i in range(8):  # each save a fresh hash map: 8 chances for another order
        save_checkpoint(tmp_path / f"c{i}", 5, model, {})
        hashes.add(sha(tmp_path / f"c{i}" / "checkpoint-5" / "model.safetensors"))
        save_weights(tmp_path / f"w{i}", model)
        hashes.add(sha(tmp_path / f"w{i}" / "model.safetensors"))
    assert len(hashes) == 2  # one for the checkpoints (their metadata holds the step), one for the weights


def test_sigterm_during_set_up_says_that_nothing_was_saved(tmp_path):
    """A SIGTERM before training starts (building the vocabulary, reading the data) ended the
    command in silence; now one line says what was kept, and the status is 143."""
    import subprocess
    import sys

    code = ("import os, signal, time\nimport bertedu.training.pretrain as p\n"
            "def setting_up(cfg, **kw):\n    os.kill(os.getpid(), signal.SIGTERM)\n    time.sleep(30)\n"
            "p.pretrain = setting_up\nfrom bertedu.cli import main\n"
            f"raise SystemExit(main(['pretrain', '--steps', '1', '--out', {str(tmp_path / 'o')!r}]))\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 143, (proc.returncode, proc.stderr)
    assert proc.stderr == ("bertedu pretrain: terminated (SIGTERM) before training started or after it ended; "
                           "nothing was saved after the last checkpoint\n")
