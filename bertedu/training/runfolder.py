"""A run folder that knows what it holds: its kind, settings and data, checked before any write.

Used by `bertedu.training.pretrain`, `finetune` and `distill` (introduced in the pretraining
notebook, where `--resume` is). A run writes `out/identity.json` before anything else:

    {"kind": "pretrain" | "finetune" | "distill",
     "settings": every setting of the run (its config dataclass),
     "data": {"corpus": {"name": ...} or {"path": ..., "sha256": ...}, ...},
     "inputs": {"vocab": {"sha256": ...}, ...},   what the run reads besides its data
     "vocab_sha256": ...}                           the run's own vocab.txt, once it is made

`check_run_folder` compares a run about to start with what the folder holds, before a byte
is written (`start_run_folder` then writes identity.json), and raises a `RunFolderError` (one line on the command line) for

- `--resume` of a folder that does not exist, is empty, holds no checkpoint to resume from,
  or holds another kind of run;
- `--resume` with another task, corpus, model, vocabulary or data: the line names each
  setting that differs, and a data file whose sha256 changed;
- a fresh run into a folder that holds the start of another kind of run.

A fresh run into the start of a run of the same kind that wrote no checkpoint (stopped
while preparing its data) removes what that start left (`leftovers`) unless it had the
same settings and data, so a vocab.txt trained for other settings is never reused.

Settings that may change between a run and its resume are those of the budget, the
bookkeeping and the hardware (`MAY_DIFFER`): a run extended by --steps, continued on a GPU
or with fewer log lines is the same run. A folder written before identity.json (a run of
an earlier bertedu) is recognised by its files: run.json (pretrain), distill.json
(distill), results.json, model/ or best/ (finetune); its settings are compared where they
were recorded. Checkpoints alone do not say which kind of run made them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any, Iterator, Optional

from ..errors import UserError
from ..model.constants import VOCAB_NAME
from .checkpoint import latest_checkpoint, open_atomic, sha256_of_file
from .jobs import LOCK_NAME

IDENTITY_NAME = "identity.json"
KINDS = {"pretrain": "pretraining", "finetune": "fine-tuning", "distill": "distillation"}
# The budget, the bookkeeping and the hardware: a resume may change them and stay the same run.
MAY_DIFFER = frozenset({
    "steps", "epochs", "max_tokens", "time_budget", "out", "log_every", "eval_every", "save_every",
    "keep_checkpoints", "progress", "device", "num_workers", "compile", "fused_adamw", "precision",
    "ddp_find_unused_parameters", "eval_batch_size", "attn_implementation", "unpad", "sparse_mlm", "overwrite",
    "threads", "patience",
})


class RunFolderError(UserError, FileExistsError):
    """--out, --resume or --overwrite do not fit what the output folder holds."""


def source_identity(spec: Optional[str]) -> Optional[dict[str, str]]:
    """What a data or vocabulary argument names: {"path", "sha256"} for a file or a folder
    that exists (a folder: the sha256 of its files' names and sha256s), else {"name"}."""
    if spec is None:
        return None
    path = Path(os.path.expanduser(str(spec)))
    if path.is_file():
        return {"path": str(spec), "sha256": sha256_of_file(path)}
    if path.is_dir():
        digest = hashlib.sha256()
        for file in sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(".")):
            digest.update(f"{file.relative_to(path).as_posix()}\0{sha256_of_file(file)}\n".encode())
        return {"path": str(spec), "sha256": digest.hexdigest()}
    return {"name": str(spec)}


def vocab_identity(folder_or_file: Optional[str]) -> Optional[dict[str, str]]:
    """The sha256 of a vocabulary a run reads from another run's folder (its vocab.txt) or a
    file; {"name"} for a shipped model's name."""
    if folder_or_file is None:
        return None
    path = Path(os.path.expanduser(str(folder_or_file)))
    if path.is_dir() and (path / VOCAB_NAME).is_file():
        return {"path": str(folder_or_file), "sha256": sha256_of_file(path / VOCAB_NAME)}
    return source_identity(folder_or_file)


def job_identity(kind: str, cfg, data: dict, inputs: Optional[dict] = None) -> dict[str, Any]:
    """identity.json's content for a run of `kind` with the settings `cfg` (a dataclass)."""
    settings = json.loads(json.dumps(dataclasses.asdict(cfg), default=str))
    return {"kind": kind, "settings": settings, "data": data, "inputs": inputs or {}}


def read_identity(out: Path) -> Optional[dict[str, Any]]:
    """What `out` holds: its identity.json, or for a folder of an earlier bertedu the kind
    (and settings, where recorded) told by its files; None for a folder of no run."""
    path = out / IDENTITY_NAME
    if path.is_file():
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError:
            raise RunFolderError(f"{path} is damaged (not JSON): this folder's run cannot be checked; "
                                 "choose another --out") from None
    legacy = [("pretrain", "run.json", None), ("distill", "distill.json", None),
              ("finetune", "results.json", "config"), ("finetune", "model", None), ("finetune", "best", None)]
    for kind, name, key in legacy:
        if (out / name).exists():
            settings = None
            if (out / name).is_file():
                try:
                    settings = json.loads((out / name).read_text(encoding="utf-8"))
                except ValueError:
                    settings = None
                settings = settings.get(key) if key and isinstance(settings, dict) else settings
            return {"kind": kind, "settings": settings, "legacy": name}
    return None  # checkpoints alone do not say which kind of run made them


def differences(found: dict, identity: dict) -> list[str]:
    """What differs between the run in a folder and the run about to start, as flag phrases:
    "--task sentiment-zh, not paraphrase-en"; [] when nothing that matters does."""
    said = []
    old, new = found.get("settings") or {}, identity["settings"]
    for name in sorted(new):
        if name in MAY_DIFFER or name not in old or old[name] == new[name]:
            continue
        said.append(f"--{name.replace('_', '-')} {_shown(old[name])}, not {_shown(new[name])}")
    for part in ("data", "inputs"):
        before, now = found.get(part), identity.get(part) or {}
        if before is None:
            continue  # a folder of an earlier bertedu: only its settings were recorded
        for key in sorted(set(before) | set(now)):
            a, b = before.get(key) or {}, now.get(key) or {}
            if a.get("path") and a.get("path") == b.get("path") and a.get("sha256") != b.get("sha256"):
                flag = "--" + key.split(":")[0].replace("_", "-")
                said.append(f"{flag} {a['path']} as it was when the run began (its sha256 has changed since)")
    return said


def _shown(value) -> str:
    return "unset" if value is None else str(value)


def check_resumable(out: str | os.PathLike, kind: str) -> None:
    """--resume of a folder that does not exist: said before anything (the run lock) creates it."""
    if not Path(out).is_dir():
        raise RunFolderError(f"--resume: {out} does not exist, so there is no run to resume: drop --resume to "
                             f"start a {KINDS[kind]} run there")


def check_run_folder(out: str | os.PathLike, identity: dict, *, resume: bool, overwrite: bool = False) -> str:
    """Check `out` against the run `identity` describes; write nothing. Returns the plan for
    `start_run_folder`: "resume"; "fresh" (nothing of this run there); "restart" (a start of
    this same run, no checkpoint yet: its files are kept); "overwrite" (finetune --overwrite
    of a run of the same kind: the caller removes it); "taken" (a run of the same kind with
    a checkpoint, and neither --resume nor --overwrite: the caller refuses in its own words).

    Raises RunFolderError for a resume that cannot be this run's (a missing or empty folder,
    no checkpoint, another kind, other settings, data or vocabulary) and for a folder that
    holds another kind of run.
    """
    out = Path(out)
    kind, what = identity["kind"], KINDS[identity["kind"]]
    found = read_identity(out) if out.is_dir() else None
    has_checkpoint = out.is_dir() and latest_checkpoint(out) is not None
    if resume:
        check_resumable(out, kind)
        _check_resume(out, identity, found, has_checkpoint)
        return "resume"
    if found is not None and found["kind"] != kind:
        then = f"--overwrite replaces only a {what} run" if overwrite else "a new run needs a folder of its own"
        raise RunFolderError(f"--out {out} holds a {KINDS[found['kind']]} run ({found.get('legacy', IDENTITY_NAME)}), "
                             f"not a {what} run: {then}; choose another --out")
    if has_checkpoint:
        return "overwrite" if overwrite else "taken"
    return "restart" if found is not None and _same_start(out, found, identity) else "fresh"


def start_run_folder(out: str | os.PathLike, identity: dict, plan: str, leftovers: tuple[str, ...] = ()) -> None:
    """After `check_run_folder` and the job's own checks: a fresh run removes what a start
    with other settings left (`leftovers`: a vocab.txt trained for another --vocab-size...)
    and writes identity.json first; "restart" and "overwrite" write identity.json; a
    resume writes nothing here."""
    out = Path(out)
    if plan == "fresh":
        remove_outputs(out, (*leftovers, IDENTITY_NAME))
    if plan in ("fresh", "restart", "overwrite"):
        write_identity(out, identity)


def remove_outputs(out: Path, names) -> None:
    """Delete out/<name> for each name, file or folder, where it exists."""
    for name in names:
        path = out / name
        if path.is_dir():
            shutil.rmtree(path)
        elif path.exists():
            path.unlink()


def _check_resume(out: Path, identity: dict, found: Optional[dict], has_checkpoint: bool) -> None:
    what = KINDS[identity["kind"]]
    if found is None and not has_checkpoint:
        state = "holds no run" if any(p.name != LOCK_NAME for p in out.iterdir()) else "is empty"
        raise RunFolderError(f"--resume: {out} {state}, so there is nothing to resume: drop --resume to start a "
                             f"{what} run there, or pass the folder of the run to continue")
    if found is not None and found["kind"] != identity["kind"]:
        raise RunFolderError(f"--resume: {out} holds a {KINDS[found['kind']]} run "
                             f"({found.get('legacy', IDENTITY_NAME)}), not a {what} run: pass the folder of the "
                             f"{what} run to continue")
    if not has_checkpoint:
        raise RunFolderError(f"--resume: {out} holds no checkpoint (the run stopped before its first one), so "
                             "there is nothing to resume: run the same command without --resume to start it again")
    said = differences(found or {}, identity)
    if said:
        raise RunFolderError(f"--resume: {out} holds a {what} run made with {'; '.join(said)}: resume it with its "
                             "own settings, or choose another --out for this run")
    vocab, recorded = out / VOCAB_NAME, (found or {}).get("vocab_sha256")
    if recorded and (not vocab.is_file() or sha256_of_file(vocab) != recorded):
        raise RunFolderError(f"--resume: {vocab} is not the vocabulary this run was trained with (its sha256 "
                             "differs from identity.json's): the checkpoints cannot be read with it")


def _same_start(out: Path, found: dict, identity: dict) -> bool:
    """A start of the same run (same kind, settings, data) whose files may be kept."""
    if "legacy" in found or differences(found, identity):
        return False
    vocab, recorded = out / VOCAB_NAME, found.get("vocab_sha256")
    return not vocab.exists() or (recorded is not None and sha256_of_file(vocab) == recorded)


def write_identity(out: Path, identity: dict) -> None:
    """Write out/identity.json atomically."""
    out.mkdir(parents=True, exist_ok=True)
    with open_atomic(out / IDENTITY_NAME) as f:
        f.write(json.dumps(identity, indent=2, sort_keys=True, ensure_ascii=False) + "\n")


def record_vocab(out: str | os.PathLike) -> None:
    """Add the sha256 of out/vocab.txt (just made or copied) to out/identity.json."""
    out = Path(out)
    path = out / IDENTITY_NAME
    if not path.is_file() or not (out / VOCAB_NAME).is_file():
        return
    identity = json.loads(path.read_text(encoding="utf-8"))
    identity["vocab_sha256"] = sha256_of_file(out / VOCAB_NAME)
    write_identity(out, identity)


@contextlib.contextmanager
def undone_if_refused(out: str | os.PathLike, outputs: tuple[str, ...]) -> Iterator[None]:
    """A run refused in the body (a UserError: a binary corpus, a vocabulary without [MASK])
    before it wrote a checkpoint leaves no identity.json or `outputs` that were not there
    before it began, so the folder is not taken for the start of a run."""
    out = Path(out)
    names = (*outputs, IDENTITY_NAME)
    before = {name for name in names if (out / name).exists()}
    try:
        yield
    except UserError:
        if out.is_dir() and latest_checkpoint(out) is None:
            remove_outputs(out, [name for name in names if name not in before])
        raise
