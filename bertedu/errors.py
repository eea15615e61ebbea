"""The project's error for a user's mistake, which the command line reports without a traceback.

`UserError` marks an error the user can fix by changing a flag or a file: a bad setting, a
missing file, a vocabulary without [MASK], an output folder that already holds a run, data
in no known format. `bertedu <command>` prints such an error as one line,

    bertedu finetune: error: --init runs/x: no checkpoint-<step> folder in it. Pass ...

and exits with status 2 (argparse's status for a usage error). Anything else is a bug and
keeps its traceback. The error classes that mean "a user's file or setting is wrong"
(`DataFormatError`, `CheckpointError`, ...) derive from it as well as from the built-in
class they always were (ValueError, RuntimeError, FileExistsError), so `except ValueError`
in older code still catches them.
"""

from __future__ import annotations

import contextlib
from typing import Iterator


class UserError(Exception):
    """A mistake the user can fix; its message says what to change (one line on the CLI)."""


class OutputFolderError(UserError, FileExistsError):
    """The output folder already holds a run, or another live run holds it."""


class SettingError(UserError, ValueError):
    """A setting (a flag, a config field) that cannot work, e.g. a vocabulary without [MASK]
    or a sequence longer than the model's positions."""


class MissingFileError(UserError, FileNotFoundError):
    """A file or folder the user named does not exist, or does not hold what it should."""


class DataUnavailableError(UserError, RuntimeError):
    """Data the user asked for by name cannot be had here (no network for a Hub download,
    a missing optional package); the message says how to get it or what to use instead."""


def one_line(error: BaseException) -> str:
    """The error's message on one line (continuation lines joined with spaces)."""
    return " ".join(part.strip() for part in str(error).splitlines() if part.strip())


@contextlib.contextmanager
def as_user_error(what: str, *types: type[BaseException]) -> Iterator[None]:
    """Re-raise the `types` the body raises (e.g. ValueError from reading a file the user
    named) as a UserError whose message starts with `what` ("--vocab my.txt"). Only for a
    body whose errors of those types all mean "the user's input is wrong"."""
    try:
        yield
    except UserError:
        raise
    except types as err:
        cls = MissingFileError if isinstance(err, FileNotFoundError) else SettingError
        raise cls(f"{what}: {one_line(err)}") from err
