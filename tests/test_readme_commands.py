"""The README's command-line examples (issue 53 item 6): every line is a command the CLI
accepts, flag for flag, and the one that answers in seconds (fill-mask) prints what the README
says beside it. The others train for minutes; their times are measured and written beside them."""

import re
import shlex
from pathlib import Path

import pytest

from bertedu.cli import build_parser, main

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_commands() -> list[list[str]]:
    """The bash block of README's "The command line" section, one argv per command."""
    section = README.read_text(encoding="utf-8").split("## The command line", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S).group(1)
    commands = []
    for line in block.replace("\\\n", " ").splitlines():
        line = re.sub(r"\$'([^']*)'", lambda m: shlex.quote(m.group(1).replace("\\t", "\t")), line)  # bash's $'...\t...'
        argv = shlex.split(line, comments=True)
        if argv:
            commands.append(argv)
    return commands


def test_the_readme_shows_one_small_example_of_each_command():
    names = [argv[1] for argv in readme_commands()]
    assert names == ["pretrain", "finetune", "predict", "distill", "fill-mask"]
    assert all(argv[0] == "bertedu" for argv in readme_commands())


@pytest.mark.parametrize("argv", readme_commands(), ids=lambda argv: argv[1])
def test_each_readme_command_parses(argv):
    args, extra = build_parser().parse_known_args(argv[1:])
    assert args.command == argv[1]
    if argv[1] == "predict":
        assert "\t" in " ".join(args.text + extra)  # $'...\t...': a pair, split at the TAB
    else:
        assert not extra


def test_the_readme_fill_mask_example_prints_what_the_readme_says(capsys):
    argv = next(a for a in readme_commands() if a[1] == "fill-mask")
    assert main(argv[1:]) == 0
    first = capsys.readouterr().out.splitlines()[1].split()
    comment = next(line for line in README.read_text(encoding="utf-8").splitlines() if line.startswith("bertedu fill-mask"))
    word, probability = re.search(r"# \d+ s: (\w+), ([\d.]+)", comment).groups()
    assert first[2:4] == [word, probability]
