"""`bertedu` on the command line: pretrain, finetune, distill, fill-mask, masked-accuracy, predict,
evaluate, export.

The flags of `bertedu pretrain` are built from `PretrainConfig`'s fields, so the command
line and the Python API cannot drift apart.

    bertedu pretrain --preset mini --corpus wiki-en --steps 2000 --out runs/mini-en
    bertedu fill-mask runs/mini-en "the capital of france is [MASK] ."
    bertedu finetune --task sentiment-zh --init runs/mini-zh --out runs/ft-sentiment
    bertedu distill --teacher minilm --layers 0,2,4 --steps 600 --out runs/distil-minilm
    bertedu masked-accuracy minilm-mlm
    bertedu predict runs/ft-sentiment "a moving film"      JSON lines: input, prediction, probabilities
    bertedu evaluate runs/ft-sentiment --task sentiment-zh
    bertedu export runs/ft-sentiment hf/ft-sentiment        a folder transformers' Auto classes load

A user's mistake (a bad value, a missing file, an --out that holds a run: a
bertedu.errors.UserError) is printed as one line, `bertedu <command>: error: ...`, with
exit status 2, as argparse does for a bad flag; anything else is a bug and keeps its
traceback. SIGINT / SIGTERM during training stop after the current step with a checkpoint,
print the command that resumes, and exit with 130 / 143.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import re
import shlex
import signal
import sys
import textwrap
import typing
import warnings
from typing import Optional, Sequence

from .errors import UserError, one_line

DESCRIPTION = "Learn BERT by building it: pretrain and probe BERTs."
# Each command's one line in `bertedu --help`, which prints them without importing torch (issue 53 item 6).
COMMAND_HELP = {
    "pretrain": "pretrain a BERT (MLM + NSP) on a corpus",
    "finetune": "fine-tune a BERT on a downstream task (an embedded or canonical task, or a PATH)",
    "distill": "distil a BERT into a smaller student (DistilBERT, TinyBERT)",
    "fill-mask": "top predictions for each [MASK] in a text, from a pretraining run",
    "masked-accuracy": "held-out masked-token accuracy of a masked LM (the measure of minilm-mlm)",
    "predict": "a fine-tuned run's predictions on new text, as JSON lines",
    "evaluate": "score a fine-tuned run on a task's split",
    "export": "write a run as a folder transformers loads",
}


def parse_duration(text: str) -> float:
    """'90' or '90s' -> 90.0; '45m' -> 2700.0; '2h' -> 7200.0."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 600, 90s, 45m, 2h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def positive_int(text: str) -> int:
    """'5' -> 5; an argparse type for counts that must be at least 1."""
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {n}")
    return n


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls) -> None:
    """One flag per field of the config dataclass `cls`, its help and default from the field.

    The command's own fields come first; the training loop's (`TrainConfig`'s) follow in
    their own group. argparse prints each default from the field, so help and code agree.
    """
    from .model.config import PRESETS
    from .training.loop import TrainConfig

    hints = typing.get_type_hints(cls)
    loop_fields = {f.name for f in dataclasses.fields(TrainConfig)}
    own = parser.add_argument_group(f"{parser.prog.split()[-1]} settings")
    loop = parser.add_argument_group("training loop (bertedu.training.loop.TrainConfig)")
    fields = dataclasses.fields(cls)
    for field in sorted(fields, key=lambda f: f.name in loop_fields):  # stable: own fields first
        group = loop if field.name in loop_fields else own
        flag = "--" + field.name.replace("_", "-")
        kind = hints[field.name]
        args = typing.get_args(kind)
        base = next((a for a in args if a is not type(None)), kind) if typing.get_origin(kind) is not tuple else kind
        help_text = field.metadata["help"] + " (default: %(default)s)"
        if base is bool:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default, help=help_text)
        elif typing.get_origin(base) is tuple:
            group.add_argument(flag, type=typing.get_args(base)[0], nargs=len(typing.get_args(base)),
                               default=field.default, help=help_text)
        else:
            convert = parse_duration if field.name == "time_budget" else base
            group.add_argument(flag, type=convert, default=field.default, help=help_text,
                               choices=list(PRESETS) if field.name == "preset" else None)


class _HelpFormatter(argparse.HelpFormatter):
    """argparse's layout, without breaking lines inside hyphenated names (paraphrase-en, wiki-en)."""

    def _split_lines(self, text, width):
        return textwrap.wrap(" ".join(text.split()), width, break_on_hyphens=False)

    def _fill_text(self, text, width, indent):
        return textwrap.fill(" ".join(text.split()), width, initial_indent=indent, subsequent_indent=indent,
                             break_on_hyphens=False)


def command_list_parser() -> argparse.ArgumentParser:
    """The top level alone, each command with its one line and no flags: what `bertedu --help`
    prints, in a fraction of a second, since it imports neither torch nor the configs."""
    parser = argparse.ArgumentParser(prog="bertedu", description=DESCRIPTION, formatter_class=_HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    for name, text in COMMAND_HELP.items():
        sub.add_parser(name, help=text)
    return parser


def build_parser() -> argparse.ArgumentParser:
    from .training.pretrain import PretrainConfig

    parser = argparse.ArgumentParser(prog="bertedu", description=DESCRIPTION, formatter_class=_HelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "pretrain", help=COMMAND_HELP["pretrain"], formatter_class=_HelpFormatter,
        description="Pretrain a BertForPreTraining (masked LM + next sentence prediction). "
                    "A preset alone runs on the embedded English Wikipedia. The paper's two phases: "
                    "run with --max-seq-length 128, then again with --max-seq-length 512 "
                    "--init-from <first run's --out> for the last 10% of steps. The minilm-mlm recipe (MiniLM "
                    "given an MLM head): --init-from minilm --packing documents --no-nsp --freeze-word-embeddings "
                    "--unigram-bias --head-lr 2e-3 --lr 2e-4 --warmup-offset 1 "
                    "(bertedu/weights/minilm-mlm/COMMAND.md).",
    )
    _add_dataclass_flags(p, PretrainConfig)
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")
    p.add_argument("--prepare-only", action="store_true",
                   help="write the vocabulary and, with --stream, OUT/examples/ in this one process, then stop: the "
                        "same command without it (under torchrun) trains from them, every process reading the store")

    from .data.task_data import TASKS
    from .training.finetune import FinetuneConfig

    ft = sub.add_parser(
        "finetune", formatter_class=_HelpFormatter, help=COMMAND_HELP["finetune"],
        description="Fine-tune an encoder with a task head (classification, tagging or extractive QA) on the "
                    "shared training loop: AdamW, warm-up then linear decay, dev evaluations with early "
                    "stopping, the best weights kept. Prints dev and test metrics; writes predictions. "
                    "Tasks: " + ", ".join(TASKS) + ", or a PATH.",
    )
    _add_dataclass_flags(ft, FinetuneConfig)
    ft.add_argument("--resume", action="store_true", help="continue the interrupted run in --out from its latest "
                                                           "checkpoint (the dev evaluations so far are kept)")

    from .training.distill import DistillConfig

    d = sub.add_parser(
        "distill", formatter_class=_HelpFormatter, help=COMMAND_HELP["distill"],
        description="Train a student made of some of the teacher's layers to imitate the teacher on the embedded "
                    "English text: TinyBERT's hidden-state and attention losses and DistilBERT's cosine loss, and "
                    "with a masked-LM teacher DistilBERT's soft targets and MLM loss. The student is saved as a "
                    "pretraining run: `bertedu finetune --init <--out>` fine-tunes it.",
    )
    _add_dataclass_flags(d, DistillConfig)
    d.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")

    _add_masked_lm_commands(sub)
    _add_run_commands(sub)
    return parser


def _add_run_commands(sub) -> None:
    """`bertedu predict`, `bertedu evaluate` and `bertedu export`: using a finished run."""
    from .pretrained import MASKED_LMS

    p = sub.add_parser("predict", formatter_class=_HelpFormatter, help=COMMAND_HELP["predict"],
                       description="Predict with a `bertedu finetune --out` folder: one JSON line per input with the "
                                   "input, the prediction and its probabilities (per word for tagging; for QA the best "
                                   "spans with their scores and character offsets). A sentence pair is "
                                   "first<TAB>second, a question question<TAB>context.")
    p.add_argument("run", help="a `bertedu finetune --out` folder")
    p.add_argument("text", nargs="*", help="the inputs, one per argument (or use --file)")
    p.add_argument("--file", help="read the inputs from this file, one per line (- : standard input)")
    p.add_argument("--out", help="write the JSON lines here instead of standard output")
    p.add_argument("--top-k", type=positive_int, default=5, help="QA: answer spans listed per question (default: 5)")
    _add_progress_flag(p)

    e = sub.add_parser("evaluate", formatter_class=_HelpFormatter, help=COMMAND_HELP["evaluate"],
                       description="Score a `bertedu finetune --out` folder on a split of a task (by default the "
                                   "test split of the task it was fine-tuned on, as the run had it: the numbers in "
                                   "its results.json), read with the run's data seed, sequence settings and columns; "
                                   "prints the metrics as JSON, as finetune reports them.")
    e.add_argument("run", help="a `bertedu finetune --out` folder")
    e.add_argument("--task", help="an embedded task, a canonical one or a PATH (default: the run's own task)")
    e.add_argument("--split", default="test", help="the split to score: test, dev, train or an extra split "
                                                   "(default: test)")
    e.add_argument("--max-eval", type=positive_int, default=None,
                   help="score a seeded subsample of at most N examples of the split, whichever it is (the run's "
                        "--data-seed; default: on the run's own task, the examples the run had, its --max-train / "
                        "--max-eval subsample, so the test split gives its results.json; on another task, all)")
    _add_column_flags(e)
    _add_progress_flag(e)

    x = sub.add_parser("export", formatter_class=_HelpFormatter, help=COMMAND_HELP["export"],
                       description="Write RUN as a folder Hugging Face transformers loads with its Auto classes "
                                   "(AutoModel, AutoModelForMaskedLM, AutoModelForSequenceClassification, "
                                   "AutoModelForTokenClassification, AutoModelForQuestionAnswering, AutoTokenizer): "
                                   "config.json (model_type bert, architectures, id2label), model.safetensors, "
                                   "vocab.txt, tokenizer_config.json, special_tokens_map.json. The folder is loaded "
                                   "back with transformers and its outputs compared with bertedu's before the "
                                   "command ends; the largest differences are printed as JSON.")
    x.add_argument("run", help="a `bertedu pretrain`, `distill` or `finetune` --out folder, minilm, or a masked LM "
                               "shipped with the course: " + ", ".join(MASKED_LMS))
    x.add_argument("out", help="the folder to write (new or empty)")
    x.add_argument("--overwrite", action="store_true", help="write into OUT even if it holds files")


def _add_masked_lm_commands(sub) -> None:
    """`bertedu fill-mask` and `bertedu masked-accuracy`: a trained masked LM's answers and measure."""
    from .pretrained import MASKED_LMS

    f = sub.add_parser("fill-mask", help=COMMAND_HELP["fill-mask"],
                       formatter_class=_HelpFormatter)
    f.add_argument("run", help="a `bertedu pretrain --out` folder, or a masked LM shipped with the course: "
                               + ", ".join(MASKED_LMS))
    f.add_argument("text", nargs="+", help="text with one or more [MASK]")
    f.add_argument("--top-k", type=positive_int, default=5, help="predictions shown per [MASK] (default: 5)")
    f.add_argument("--untrained", action="store_true",
                   help="also show the same architecture with random weights (seed 0), for comparison")

    m = sub.add_parser("masked-accuracy", formatter_class=_HelpFormatter,
                       help=COMMAND_HELP["masked-accuracy"],
                       description="Held-out masked-token accuracy and MLM loss on wiki-en's held-out documents "
                                   "(bertedu.training.heldout.masked_accuracy: 128-piece sequences, 15% of the pieces "
                                   "selected, masks fixed by --seed), printed as JSON.")
    m.add_argument("run", help="a `bertedu pretrain --out` folder, or a masked LM shipped with the course: "
                               + ", ".join(MASKED_LMS))
    m.add_argument("--seed", type=int, default=0, help="seed of the masks (default: 0, as every run's measure)")
    m.add_argument("--max-sequences", type=positive_int, default=None,
                   help="score only the first N held-out sequences (default: all; runs log the first 256)")
    _add_progress_flag(m)


def _add_column_flags(parser: argparse.ArgumentParser) -> None:
    """`bertedu evaluate`'s --text-column, --text-pair-column and --label-column, as finetune's."""
    for flag, what in (("--text-column", "the text"), ("--text-pair-column", "a pair's second text"),
                       ("--label-column", "the label")):
        parser.add_argument(flag, default=None, help=f"--task PATH: the column of {what} (default: the run's own "
                                                     "on its own task, else the common names, as finetune)")


def _add_progress_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--progress", action=argparse.BooleanOptionalAction, default=True,
                        help="say on stderr, on a terminal, what is being loaded and scored and how long it took "
                             "(default: %(default)s)")


def _config_from_args(cls, args: argparse.Namespace):
    """The config dataclass from the parsed flags; None (after printing why) if it is invalid."""
    names = {f.name for f in dataclasses.fields(cls)}
    values = {k: tuple(v) if isinstance(v, list) else v for k, v in vars(args).items() if k in names}
    try:
        return cls(**values)
    except ValueError as err:  # __post_init__'s checks: every one is about a flag's value
        _error(args.command, err)
        return None


def _error(command: str, err: BaseException) -> None:
    print(f"bertedu {command}: error: {one_line(err)}", file=sys.stderr)


def _resume_command(command: str, argv: Sequence[str]) -> str:
    """The command line that continues an interrupted run: the same flags plus --resume."""
    args = [a for a in argv if a != "--resume"]
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    launcher = ["bertedu"]
    if world_size > 1:
        launcher = ["torchrun", "--standalone", "--nproc-per-node", str(world_size), "-m", "bertedu.cli"]
    return shlex.join([*launcher, *args, "--resume"])


# ---- `bertedu <command> --help` without torch ------------------------------------------------------
# The flags come from config dataclasses in modules that import torch (3 s). Their help is kept,
# as data, in training/cli_flags.py, with the sha256 of the sources it was built from: while they
# match, --help is built from it; otherwise from the real parser. tests/test_cli.py checks it is
# current; after changing a flag, write it again with `python -m bertedu.cli --write-help-snapshot`.
HELP_SOURCES = ("cli.py", "utils.py", "pretrained.py", "model/config.py", "data/task_data.py",
                "training/config.py", "training/loop.py", "training/pretrain.py", "training/finetune.py",
                "training/distill.py")


def help_sources_sha256() -> str:
    """One sha256 over the sources `build_parser` reads its flags from (HELP_SOURCES)."""
    import hashlib
    from pathlib import Path

    digest = hashlib.sha256()
    for name in HELP_SOURCES:
        digest.update(name.encode() + b"\0" + (Path(__file__).parent / name).read_bytes() + b"\0")
    return digest.hexdigest()


def parser_spec(parser: argparse.ArgumentParser) -> dict:
    """Each command's description, argument groups and arguments (in the parser's order, each
    with its group's index), every argument as its help shows it."""
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    spec = {}
    for name, command in sub.choices.items():
        group_of = {id(a): i for i, g in enumerate(command._action_groups) for a in g._group_actions}
        arguments = []
        for action in command._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            argument = {"flags": list(action.option_strings), "dest": action.dest, "group": group_of[id(action)],
                        "help": command._get_formatter()._expand_help(action) if action.help else None,
                        "nargs": action.nargs, "metavar": action.metavar,
                        "choices": [str(c) for c in action.choices] if action.choices else None,
                        "kind": type(action).__name__}
            arguments.append({k: v for k, v in argument.items() if v not in (None, [], "_StoreAction")})
        groups = [[g.title, g.description] for g in command._action_groups]
        spec[name] = {"description": command.description, "groups": groups, "arguments": arguments}
    return spec


def _help_from_spec(command: str, spec: dict) -> argparse.ArgumentParser:
    """A parser that prints what `build_parser()`'s `command` prints for --help (and parses nothing)."""
    parser = argparse.ArgumentParser(prog=f"bertedu {command}", description=spec["description"],
                                     formatter_class=_HelpFormatter)
    made = {g.title: g for g in parser._action_groups}
    groups = [made.get(title) or parser.add_argument_group(title, description)
              for title, description in spec["groups"]]
    actions = {"BooleanOptionalAction": argparse.BooleanOptionalAction, "_StoreTrueAction": "store_true"}
    for arg in spec["arguments"]:
        kind = arg.get("kind", "_StoreAction")
        more = {"action": actions[kind]} if kind in actions else \
            {k: arg.get(k) for k in ("nargs", "metavar", "choices")}
        text = arg["help"].replace("%", "%%") if "help" in arg else None
        flags = arg.get("flags", [])
        if not flags:
            groups[arg["group"]].add_argument(arg["dest"], help=text, **more)
        else:  # BooleanOptionalAction adds each --no-X itself
            flags = flags[::2] if kind == "BooleanOptionalAction" else flags
            groups[arg["group"]].add_argument(*flags, dest=arg["dest"], help=text, **more)
    return parser


def _print_command_help(command: str) -> bool:
    """Print `bertedu COMMAND --help` from training/cli_flags.py if it is current; False if not."""
    from .training import cli_flags

    if command not in cli_flags.FLAGS or cli_flags.SOURCES_SHA256 != help_sources_sha256():
        return False
    _help_from_spec(command, cli_flags.FLAGS[command]).print_help()
    return True


def write_help_snapshot() -> str:
    """Write training/cli_flags.py from `build_parser()` (run after changing a flag); its path."""
    import pprint
    from pathlib import Path

    path = Path(__file__).parent / "training" / "cli_flags.py"
    path.write_text(
        '"""Generated by `python -m bertedu.cli --write-help-snapshot`: every command\'s flags as its --help\n'
        "shows them, so that `bertedu <command> --help` answers without importing torch (cli.py).\n"
        'Do not edit: tests/test_cli.py checks it against the parser."""\n\n'
        f"SOURCES_SHA256 = {help_sources_sha256()!r}\n\n"
        f"FLAGS = (\n{pprint.pformat(parser_spec(build_parser()), width=116, compact=True, sort_dicts=False)}\n)\n",
        encoding="utf-8")
    return str(path)


def _quiet_openmp() -> None:
    """OMP_WAIT_POLICY=PASSIVE unless the user set it: OpenMP threads that spin while waiting took
    twice the time next to one other busy process on two cores (issue 60). Read when torch loads."""
    os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")


def main(argv: Optional[Sequence[str]] = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    _quiet_openmp()
    if argv in (["-h"], ["--help"]):
        command_list_parser().print_help()
        return 0
    if argv == ["--write-help-snapshot"]:
        print(write_help_snapshot())
        return 0
    if argv and argv[0] in COMMAND_HELP and ("-h" in argv or "--help" in argv) and _print_command_help(argv[0]):
        return 0
    from .training.jobs import TrainingInterrupted

    parser = build_parser()
    args, extra = parser.parse_known_args(argv)
    if args.command == "predict" and not any(a.startswith("-") for a in extra):
        args.text += extra  # TEXTs after an option: argparse gave the nargs="*" positional nothing at RUN
    elif extra:
        parser.error(f"unrecognized arguments: {' '.join(extra)}")
    # A warning is one line on the command line too, named like the errors (and put back after,
    # for a caller that runs main() in its own process).
    python_format = warnings.formatwarning
    warnings.formatwarning = lambda message, *_, **__: f"bertedu {args.command}: warning: {message}\n"
    python_sigterm = _say_sigterm()
    try:
        return _run(args)
    except _Terminated:  # outside training (set-up, or the scoring after it): nothing of this step to keep
        print(f"bertedu {args.command}: terminated (SIGTERM) before training started or after it ended; nothing "
              "was saved after the last checkpoint", file=sys.stderr)
        return 143
    except UserError as err:
        _error(args.command, err)
        return 2
    except TrainingInterrupted as stop:
        print(f"bertedu {args.command}: {stop}", file=sys.stderr)
        if stop.checkpoint and os.environ.get("RANK", "0") == "0":  # under torchrun: once, from process 0
            print(f"resume with: {_resume_command(args.command, argv)}", file=sys.stderr)
        return stop.exit_status
    except KeyboardInterrupt:  # before training started (building a vocabulary, the data): nothing to keep
        print(f"bertedu {args.command}: interrupted; nothing was saved after the last checkpoint",
              file=sys.stderr)
        return 130
    finally:
        warnings.formatwarning = python_format
        if python_sigterm is not None:
            signal.signal(signal.SIGTERM, python_sigterm)


class _Terminated(BaseException):
    """SIGTERM outside the training loop (which installs its own handler and stops after a step)."""


def _say_sigterm():
    """SIGTERM raises _Terminated, so that it ends with a line saying what was kept; the previous
    handler, or None where none can be installed (not the main thread) or the signal is ignored."""
    def terminated(signum, frame):
        raise _Terminated()

    try:
        if signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
            return None
        return signal.signal(signal.SIGTERM, terminated)
    except ValueError:  # not the main thread
        return None


def _print_summary(result) -> None:
    """A finished (or stopped) training run's `TrainResult`, as JSON on stdout."""
    summary = {"step": result.step, "loss": result.loss, "tokens": result.tokens_seen,
               "elapsed_s": round(result.elapsed_s, 1), "stopped_by": result.stopped_by,
               "checkpoint": result.checkpoint, "eval": result.eval}
    print(json.dumps(summary, indent=2))


def _warn_past_trained_length(run: str, lengths: list[int]) -> None:
    from .pretrained import length_warning, trained_length

    message = length_warning(run, max(lengths, default=0), trained_length(run))
    if message:
        warnings.warn(message, stacklevel=2)


def _fill_mask(args: argparse.Namespace) -> int:
    from .data.vocab import warn_if_unreadable
    from .training.masked_lms import check_head_weights, check_masked_lm
    from .training.pretrain import fill_mask, load_masked_lm_or_run

    check_masked_lm(args.run)  # minilm, a typo, a head never trained: one line, before loading anything
    model, tokenizer = load_masked_lm_or_run(args.run)
    check_head_weights(model, args.run)
    warn_if_unreadable(args.text, tokenizer, "the text's words", f"{args.run}'s", ", so its guesses say little: pick "
                       "a masked LM made for the text's language (English: course-en, minilm-mlm; Chinese: course-zh, "
                       "course-zh-wwm)")
    lengths = [len(tokenizer.encode(t, truncation=False).input_ids) for t in args.text]
    # past the positions there are, fill_mask stops with an error; the warning is for those within them
    _warn_past_trained_length(args.run, [n for n in lengths if n <= model.config.max_position_embeddings])
    models = [("trained", model)]
    if args.untrained:
        import torch

        from .model.heads import BertForPreTraining

        torch.manual_seed(0)
        models.append(("untrained", BertForPreTraining(model.config).eval()))
    # every text filled before any prints: a text without [MASK] stops the command with nothing half shown
    filled = [[(name, fill_mask(m, tokenizer, text, args.top_k)) for name, m in models] for text in args.text]
    for text, by_model in zip(args.text, filled):
        print(text)
        for name, per_mask in by_model:
            for i, preds in enumerate(per_mask):
                shown = "  ".join(f"{tok} {p:.3f}" for tok, p in preds)
                label = f"{name} " if len(models) > 1 else ""
                print(f"  {label}[MASK] {i + 1}: {shown}")
    return 0


def _run(args: argparse.Namespace) -> int:
    if args.command in ("pretrain", "distill"):
        if args.command == "pretrain":
            from .training.pretrain import PretrainConfig as Config, pretrain as run
        else:
            from .training.distill import DistillConfig as Config, distill as run
        cfg = _config_from_args(Config, args)
        if cfg is None:
            return 2
        more = {"prepare_only": True} if getattr(args, "prepare_only", False) else {}
        _print_summary(run(cfg, resume=args.resume, **more))
        return 0
    if args.command == "finetune":
        from .training.finetune import FinetuneConfig, finetune, results_table

        cfg = _config_from_args(FinetuneConfig, args)
        if cfg is None:
            return 2
        results = finetune(cfg, resume=args.resume)
        print(f"{results['task']} from {results['init']}: best dev at step {results['best_step']} of "
              f"{results['steps']}{' (stopped early)' if results['stopped_early'] else ''}; results in {cfg.out}")
        print(results_table(results))
        return 0
    if args.command == "masked-accuracy":
        from .data.documents import wiki_en_held_out
        from .data.vocab import warn_if_unreadable
        from .training.heldout import masked_accuracy
        from .training.progress import stage
        from .training.masked_lms import check_head_weights, check_masked_lm
        from .training.pretrain import load_masked_lm_or_run

        check_masked_lm(args.run)
        model, tokenizer = load_masked_lm_or_run(args.run)
        check_head_weights(model, args.run)
        held_out = wiki_en_held_out()  # what masked_accuracy reads by default
        warn_if_unreadable([s for doc in held_out for s in doc], tokenizer, "the held-out English words",
                           f"{args.run}'s", ", so this score says little about it; measure it on the text its run "
                           f"held out: python benchmarks/course_lengths.py {args.run}")
        with stage(f"scoring {args.run} on wiki-en's held-out documents", args.progress):
            scores = masked_accuracy(model, tokenizer, held_out, seed=args.seed, max_sequences=args.max_sequences)
        print(json.dumps(scores))
        return 0
    if args.command == "fill-mask":
        return _fill_mask(args)
    if args.command in ("predict", "evaluate", "export"):
        return _use_run(args)
    return 2


def _use_run(args: argparse.Namespace) -> int:
    """`bertedu predict`, `evaluate` and `export`."""
    from .training.progress import stage

    if args.command == "export":
        from .training.to_transformers import export_to_transformers

        print(json.dumps(export_to_transformers(args.run, args.out, overwrite=args.overwrite), ensure_ascii=False))
        return 0
    if args.command == "evaluate":
        from .training.inference import evaluate_run

        with stage(f"loading {args.run} and scoring its {args.split} split", args.progress):
            columns = {k: getattr(args, k) for k in ("text_column", "text_pair_column", "label_column")}
            scores = evaluate_run(args.run, args.task, args.split, args.max_eval, columns)
        print(json.dumps(scores, indent=2, ensure_ascii=False))
        return 0
    from .training.inference import predict_texts

    inputs = _input_lines(args)
    if args.out:
        _check_out_file(args.out)  # before loading anything
    with stage(f"loading {args.run} and predicting", args.progress) as made:
        rows = predict_texts(args.run, inputs, args.top_k)
        made["inputs"] = len(inputs)
    lines = "".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows)
    if args.out:
        from .errors import SettingError

        try:
            with open(args.out, "w", encoding="utf-8") as f:
                f.write(lines)
        except OSError as err:
            raise SettingError(f"--out {args.out}: cannot write this file ({err.strerror or err})") from None
    else:
        sys.stdout.write(lines)
    return 0


def _check_out_file(out: str) -> None:
    """`predict --out FILE`: a file name in a folder that exists and can be written to."""
    from pathlib import Path

    from .errors import SettingError

    path = Path(out)
    if path.is_dir():
        raise SettingError(f"--out {out} is a folder: give a file name, e.g. --out {path / 'predictions.jsonl'}")
    folder = path.parent
    if not folder.is_dir():
        what = "is a file" if folder.exists() else "does not exist"
        raise SettingError(f"--out {out}: the folder {folder} {what}: write into a folder that exists")
    if not os.access(folder, os.W_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise SettingError(f"--out {out}: not writable: choose a file you can write to")


def _input_lines(args: argparse.Namespace) -> list[str]:
    """The inputs of `bertedu predict`: its TEXT arguments, or the lines of --file (blank lines skipped)."""
    from .errors import MissingFileError, SettingError

    if args.text and args.file:
        raise SettingError("give the inputs as TEXT arguments or with --file, not both")
    if args.file is None:
        if not args.text:
            raise SettingError("nothing to predict: give TEXT arguments or --file PATH (one input per line)")
        return list(args.text)
    if args.file == "-":
        lines = sys.stdin.read().splitlines()
    else:
        try:
            with open(args.file, encoding="utf-8") as f:
                lines = f.read().splitlines()
        except (FileNotFoundError, NotADirectoryError):
            raise MissingFileError(f"--file {args.file}: no such file") from None
        except IsADirectoryError:
            raise SettingError(f"--file {args.file} is a folder: give a text file, one input per line") from None
        except OSError as err:
            raise SettingError(f"--file {args.file}: cannot read it ({err.strerror or err})") from None
        except UnicodeDecodeError:
            raise SettingError(f"--file {args.file} is not UTF-8 text (a binary file?)") from None
    lines = [line for line in lines if line.strip()]
    if not lines:
        raise SettingError(f"--file {args.file} holds no input lines")
    return lines


if __name__ == "__main__":
    raise SystemExit(main())
