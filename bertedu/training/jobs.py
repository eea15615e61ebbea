"""What a training job on a shared machine needs: one run per output folder, and a clean stop.

Used by `bertedu.training.loop` (and `pretrain` / `finetune`, which hold the lock for the whole run).

- `run_lock(out)`: an exclusive `fcntl.flock` on `out/.lock`, held by the process for as
  long as the run lasts. A second run on the same folder fails at once with an error
  naming the process that holds it. The operating system drops the lock when the process
  dies, however it dies (kill -9, out of memory, a pre-empted node), so a crash never
  leaves the folder stuck: its `.lock` file stays behind, but nobody holds it, and the
  next run takes it over (a run that ends normally removes the file). Under
  torchrun only process 0 takes it (all processes of one job share the folder).
- `StopSignals`: SIGINT (Ctrl-C) and SIGTERM (what schedulers such as Slurm send before
  they pre-empt a job) set a flag instead of killing the process; the training loop
  finishes its optimiser step, writes a checkpoint and raises `TrainingInterrupted`,
  which the command line turns into "where the checkpoint is, how to resume" and exit
  status 128 + the signal's number (130 for SIGINT, 143 for SIGTERM), as a shell does.
  A second Ctrl-C stops at once (KeyboardInterrupt).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
from pathlib import Path
from typing import Iterator, Optional

from ..errors import OutputFolderError, SettingError

LOCK_NAME = ".lock"
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

try:  # POSIX; elsewhere runs are not locked (a warning-free no-op)
    import fcntl
except ImportError:  # pragma: no cover (Windows)
    fcntl = None

_held: dict[str, list] = {}  # resolved folder -> [file descriptor, depth]: this process's locks


def make_out_folder(out_dir: str | os.PathLike, flag: str = "--out") -> Path:
    """Create a run's output folder and its parents; one that cannot be made or written to is
    the user's to change (SettingError: one line on the command line, naming `flag`)."""
    out = Path(out_dir)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise SettingError(f"{flag} {out}: cannot create this folder ({err.strerror or err}): "
                           "choose a folder you can write to") from None
    if not os.access(out, os.W_OK):
        raise SettingError(f"{flag} {out}: this folder is not writable: choose a folder you can write to")
    return out


def check_creatable(path: str | os.PathLike, what: str) -> Path:
    """Refuse, before any work, a path that cannot be made: under a file, or in a folder that is
    not writable (SettingError naming `what`, e.g. "--out runs/x"). Makes nothing."""
    path = Path(path)
    above = path if path.exists() else path.parent
    while not above.exists() and above != above.parent:
        above = above.parent
    if above.exists() and not above.is_dir():
        raise SettingError(f"{what}: cannot create this path ({above} is a file, not a folder): "
                           "choose a folder you can write to")
    if above.exists() and not os.access(above, os.W_OK):
        raise SettingError(f"{what}: {above} is not writable: choose a folder you can write to")
    return path


@contextlib.contextmanager
def run_lock(out_dir: str | os.PathLike) -> Iterator[None]:
    """Hold `out_dir/.lock` for the body; raise OutputFolderError at once if another
    process holds it. Re-entrant within a process (finetune holds it around each train())."""
    out = Path(out_dir)
    if fcntl is None or int(os.environ.get("RANK", "0")) != 0:
        yield
        return
    make_out_folder(out)
    key = str(out.resolve())
    if key in _held:
        _held[key][1] += 1
        try:
            yield
        finally:
            _held[key][1] -= 1
        return
    path = out / LOCK_NAME
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # BlockingIOError: somebody else holds it
            holder = os.pread(fd, 200, 0).decode("utf-8", "replace").strip() or "another process"
            os.close(fd)
            raise OutputFolderError(
                f"{out} is in use by a live run ({holder} holds {path}): wait for it to finish, stop it, "
                "or choose another --out"
            ) from None
        try:
            if os.stat(path).st_ino == os.fstat(fd).st_ino:
                break  # the lock is on the file that is there now
        except FileNotFoundError:
            pass
        os.close(fd)  # its holder removed it while we opened it: lock the new one
    os.ftruncate(fd, 0)
    os.pwrite(fd, f"process {os.getpid()} on {socket.gethostname()}\n".encode(), 0)
    _held[key] = [fd, 1]
    try:
        yield
    finally:
        _held[key][1] -= 1
        if _held[key][1] == 0:
            del _held[key]
            path.unlink(missing_ok=True)  # before the lock drops: a waiter re-checks the inode
            os.close(fd)  # closing drops the lock


class TrainingInterrupted(KeyboardInterrupt):
    """Training stopped on SIGINT or SIGTERM after a whole step; `checkpoint` holds it.

    A KeyboardInterrupt, so code that stops on Ctrl-C (and Jupyter) treats it as one.
    """

    def __init__(self, signum: int, step: int, checkpoint: Optional[str]):
        self.signum, self.step, self.checkpoint = signum, step, checkpoint
        name = signal.Signals(signum).name
        where = f"checkpoint {checkpoint}" if checkpoint else "no checkpoint (no output folder)"
        super().__init__(f"stopped by {name} after step {step}: {where}")

    @property
    def exit_status(self) -> int:
        """128 + the signal's number, as a shell reports a process a signal ended."""
        return 128 + self.signum


class StopSignals:
    """While active, SIGINT and SIGTERM only set `self.signum`; the loop asks `requested()`
    after each step. Installed only from the main thread (the only one that may). Use
    `stop_signals()`, which nests: finetune holds one across its train() calls, so a
    signal between two of them (while scoring dev) is not lost."""

    def __init__(self) -> None:
        self.signum: Optional[int] = None
        self._previous: dict[int, object] = {}

    def __enter__(self) -> "StopSignals":
        if threading.current_thread() is threading.main_thread():
            for signum in STOP_SIGNALS:
                if signal.getsignal(signum) is signal.SIG_IGN:
                    continue  # ignored on purpose (nohup, a background job of a script): keep it so
                self._previous[signum] = signal.signal(signum, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        for signum, handler in self._previous.items():
            signal.signal(signum, handler)
        self._previous = {}

    def _handle(self, signum, frame) -> None:
        if self.signum is not None and signum == signal.SIGINT:
            raise KeyboardInterrupt  # a second Ctrl-C: stop now, without the checkpoint
        self.signum = signum
        print(f"\n{signal.Signals(signum).name} received: finishing this step and writing a checkpoint "
              "(Ctrl-C again stops at once, without it)", file=sys.stderr, flush=True)

    def requested(self, ctx=None) -> int:
        """The signal to stop on (0: none). Under torchrun all processes agree, so they stop
        at the same step: one tiny all-reduce (MAX) per step, only when world_size > 1."""
        signum = self.signum or 0
        if ctx is not None and ctx.world_size > 1:
            import torch
            import torch.distributed as dist

            flag = torch.tensor([signum], device=ctx.device)
            dist.all_reduce(flag, op=dist.ReduceOp.MAX)
            signum = int(flag.item())
        return signum


_active: Optional[StopSignals] = None


@contextlib.contextmanager
def stop_signals() -> Iterator[StopSignals]:
    """The active `StopSignals` if there is one (nested use), else a new one for the body."""
    global _active
    if _active is not None:
        yield _active
        return
    with StopSignals() as stop:
        _active = stop
        try:
            yield stop
        finally:
            _active = None
