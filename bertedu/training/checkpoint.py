"""Checkpoints that resume exactly: weights, optimiser, RNG and data position, written atomically.

Used by `bertedu.training.loop` (introduced in the pretraining notebook). One checkpoint is a
directory `out_dir/checkpoint-<step>/` holding

    model.safetensors    the weights (safetensors: no pickle, safe to load from anyone)
    config.json          the model's config fields (BertConfig), to catch a mismatch early
    training_state.pt    optimiser state, step, data position, tokens seen, RNG states
                         (only tensors, numbers, strings, lists and dicts, so it loads with
                         torch.load(weights_only=True): nothing in it can run code)
    manifest.json        every other file's size and sha256, written last

Verified: loading checks every file against the manifest, so a truncated or corrupted
file (a full disk, a copy cut short, a bad sector) is an error that names the file
(`DamagedCheckpointError`) instead of weights silently wrong; resuming then falls back
to the newest intact checkpoint. A checkpoint from before manifests (no manifest.json)
still loads, with a warning that it could not be verified.

Atomic: everything is written into a hidden temporary directory first and only then
renamed to `checkpoint-<step>` (a rename is all-or-nothing on one file system), so a
crash while saving leaves the previous checkpoint untouched and never a half-written one
under a real name.

Every weight file in bertedu goes through this module: `save_checkpoint` /
`load_checkpoint` for training checkpoints, `save_weights` / `load_weights` for a folder
of weights alone (a fine-tuned model, the shipped pretrained models). Both write
atomically and check the saved config against the model on load.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import os
import random
import re
import shutil
import warnings
from pathlib import Path
from typing import IO, Any, Callable, Iterator, Optional

import numpy as np
import torch
from safetensors.torch import load_file, load_model, save_model
from torch import nn

from ..errors import UserError
from ..model.constants import FOLDER_MARK
from ..utils import permissions_as_umask

WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"
STATE_NAME = "training_state.pt"
MANIFEST_NAME = "manifest.json"
CHECKPOINT_FILES = (WEIGHTS_NAME, CONFIG_NAME, STATE_NAME)
_CHECKPOINT_RE = re.compile(r"^checkpoint-(\d+)$")
_TMP_PREFIX = ".tmp-checkpoint-"

# Config fields that change how the model runs but not what its weights mean.
_CONFIG_FIELDS_NOT_COMPARED = ("attn_implementation",)


class CheckpointError(UserError, RuntimeError):
    """A checkpoint is missing, incomplete or does not fit the model."""


class DamagedCheckpointError(CheckpointError):
    """A file of a checkpoint does not match its manifest (truncated or corrupted)."""


# ---- RNG states as plain tensors (so weights_only loading accepts them) -----------------
def rng_state() -> dict[str, Any]:
    """The state of every random number generator training draws from."""
    py_version, py_state, py_gauss = random.getstate()
    np_kind, np_keys, np_pos, np_has_gauss, np_gauss = np.random.get_state()
    state = {
        "python": {"version": py_version, "state": torch.tensor(py_state, dtype=torch.int64), "gauss": py_gauss},
        "numpy": {"kind": np_kind, "keys": torch.from_numpy(np_keys.astype(np.int64)), "pos": int(np_pos),
                  "has_gauss": int(np_has_gauss), "gauss": float(np_gauss)},
        "torch": torch.get_rng_state(),
        # this process's GPU only (under DDP each process owns one); none if CUDA was never used
        "cuda": [torch.cuda.get_rng_state()] if torch.cuda.is_initialized() else [],
    }
    return state


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what `rng_state()` captured."""
    py = state["python"]
    random.setstate((py["version"], tuple(int(x) for x in py["state"].tolist()), py["gauss"]))
    npy = state["numpy"]
    keys = npy["keys"].numpy().astype(np.uint32)
    np.random.set_state((npy["kind"], keys, npy["pos"], npy["has_gauss"], npy["gauss"]))
    torch.set_rng_state(state["torch"])
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"][0])


# ---- finding checkpoints ------------------------------------------------------------------
def list_checkpoints(out_dir: str | os.PathLike) -> list[Path]:
    """Complete checkpoint directories in `out_dir`, oldest step first."""
    out_dir = Path(out_dir)
    if not out_dir.is_dir():
        return []
    found = []
    for p in out_dir.iterdir():
        m = _CHECKPOINT_RE.match(p.name)
        if m and p.is_dir():
            found.append((int(m.group(1)), p))
    return [p for _, p in sorted(found)]


def latest_checkpoint(out_dir: str | os.PathLike) -> Optional[Path]:
    """The checkpoint with the highest step in `out_dir`, or None."""
    found = list_checkpoints(out_dir)
    return found[-1] if found else None


# Config fields a config.json holds only when set, so that the files of models without them
# stay byte for byte what they were before the field existed (the shipped weights' manifests).
_SAVED_ONLY_WHEN_SET = ("pad_vocab_to_multiple_of",)


def config_dict(config: Any) -> dict[str, Any]:
    """A dataclass config as its config.json holds it (`_SAVED_ONLY_WHEN_SET` left out when None)."""
    return {k: v for k, v in dataclasses.asdict(config).items() if not (k in _SAVED_ONLY_WHEN_SET and v is None)}


def model_config_dict(model: nn.Module) -> dict[str, Any]:
    """The model's config as a dict (empty when the model has no dataclass `.config`)."""
    config = getattr(model, "config", None)
    return config_dict(config) if dataclasses.is_dataclass(config) else {}


# ---- saving -------------------------------------------------------------------------------
def save_checkpoint(
    out_dir: str | os.PathLike,
    step: int,
    model: nn.Module,
    training_state: dict[str, Any],
    *,
    keep_last: int = 1,
    extra_json: Optional[dict[str, dict]] = None,
) -> Path:
    """Write `out_dir/checkpoint-<step>/` atomically; keep only the newest `keep_last`.

    model: the bare module (not wrapped in DDP / torch.compile).
    training_state: optimiser state dict, data position, RNG states... (weights_only-safe).
    extra_json: more small JSON files to put beside them, {file name: dict}.
    """
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    _remove_stale_temporaries(out_dir)
    final = out_dir / f"checkpoint-{step}"

    def write(tmp: Path) -> None:
        _write_weights(tmp, model, extra_json, metadata={"step": str(step)})
        torch.save(training_state, tmp / STATE_NAME)
        write_manifest(tmp)  # last: it vouches for everything above

    _write_folder_atomically(final, write)
    if keep_last > 0:  # only once the new checkpoint is complete are others removed
        for old in checkpoints_to_remove(out_dir, final, keep_last):
            shutil.rmtree(old, ignore_errors=True)
    return final


def checkpoints_to_remove(out_dir: Path, final: Path, keep_last: int) -> list[Path]:
    """Retention after `final` (just written, so intact) was saved: keep it and the newest
    `keep_last - 1` older checkpoints that look intact (`looks_intact`: every file of the size
    its manifest says; a truncated one never counts); remove the other older ones, and those
    of a later step than `final`, left by a run that resumed from before them because they
    were damaged (the resumed run writes those steps again)."""
    step = _step_of(final)
    older = [p for p in list_checkpoints(out_dir) if _step_of(p) < step]
    later = [p for p in list_checkpoints(out_dir) if _step_of(p) > step]
    kept = [p for p in older if looks_intact(p)][-(keep_last - 1):] if keep_last > 1 else []
    return [p for p in older if p not in kept] + later


def _step_of(path: Path) -> int:
    return int(_CHECKPOINT_RE.match(path.name).group(1))


def looks_intact(folder: str | os.PathLike) -> bool:
    """A cheap check of a checkpoint (no sha256): it has its manifest and every file the
    manifest lists, each of the listed size. A checkpoint from before manifests counts as intact."""
    folder = Path(folder)
    manifest = folder / MANIFEST_NAME
    if not manifest.is_file():
        return all((folder / name).is_file() for name in CHECKPOINT_FILES)
    try:
        files = json.loads(manifest.read_text(encoding="utf-8"))["files"]
        return all((folder / name).is_file() and (folder / name).stat().st_size == entry["size"]
                   for name, entry in files.items())
    except (ValueError, KeyError, TypeError, OSError):
        return False


def save_weights(folder: str | os.PathLike, model: nn.Module, *, extra_json: Optional[dict[str, dict]] = None) -> Path:
    """Write `folder/` atomically: model.safetensors, config.json and the `extra_json` files.

    A folder of weights alone (no optimiser or RNG state), e.g. a fine-tuned model, with its
    manifest.json (each file's size and sha256), so that `load_weights` finds a flipped byte;
    an existing folder of that name is replaced only once the new one is complete.
    """
    folder = Path(folder)
    folder.parent.mkdir(parents=True, exist_ok=True)

    def write(tmp: Path) -> None:
        _write_weights(tmp, model, extra_json)
        write_manifest(tmp)  # last: `load_weights` checks every file against it

    _write_folder_atomically(folder, write)
    return folder


def _write_weights(folder: Path, model: nn.Module, extra_json: Optional[dict[str, dict]],
                   metadata: Optional[dict[str, str]] = None) -> None:
    # safetensors refuses two names for one tensor; save_model drops the tied alias
    # (mlm.decoder.weight is the word-embedding matrix) and load_model re-ties it.
    save_model(model, str(folder / WEIGHTS_NAME), metadata={"format": "pt", **(metadata or {})})
    sort_safetensors_metadata(folder / WEIGHTS_NAME)
    permissions_as_umask(folder / WEIGHTS_NAME)  # safetensors writes 0600
    config = model_config_dict(model)  # with FOLDER_MARK: transformers refuses the folder instead of misreading it
    _write_json(folder / CONFIG_NAME, {**config, **FOLDER_MARK} if config else config)
    for name, content in (extra_json or {}).items():
        _write_json(folder / name, content)


def sort_safetensors_metadata(path: str | os.PathLike) -> None:
    """Put the keys of a .safetensors file's `__metadata__` in sorted order, in place.

    safetensors writes them from a hash map, in another order each time: the same weights made
    files whose bytes (and sha256) differed from one run to the next. Sorted, the same tensors
    and metadata give the same bytes. The header keeps its length, so nothing else moves."""
    with open(path, "r+b") as f:
        size = int.from_bytes(f.read(8), "little")
        header = f.read(size).decode("utf-8")
        key = '"__metadata__":'
        start = header.find(key)
        if start < 0:
            return
        start += len(key)
        metadata, end = json.JSONDecoder().raw_decode(header, start)
        ordered = json.dumps(dict(sorted(metadata.items())), separators=(",", ":"), ensure_ascii=False)
        if len(ordered.encode("utf-8")) != len(header[start:end].encode("utf-8")):
            raise RuntimeError(f"{path}: unexpected safetensors header layout")  # a bug: safetensors changed
        f.seek(8 + len(header[:start].encode("utf-8")))
        f.write(ordered.encode("utf-8"))


def _write_folder_atomically(final: Path, write) -> None:
    """write(tmp) fills a hidden temporary sibling of `final`, which is then renamed to it."""
    tmp = final.parent / f"{_TMP_PREFIX}{final.name}-{os.getpid()}"
    tmp.mkdir()
    try:
        write(tmp)
        _fsync_dir(tmp)
        if final.exists():  # writing the same folder again: move the old one aside first
            old = final.parent / f"{_TMP_PREFIX}old-{final.name}-{os.getpid()}"
            os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old)
        else:
            os.replace(tmp, final)  # the atomic moment: before it, no folder of that name exists
        _fsync_dir(final.parent)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


@contextlib.contextmanager
def open_atomic(path: str | os.PathLike, encoding: str = "utf-8", binary: bool = False) -> Iterator[IO]:
    """Write a file atomically: the body writes to a hidden temporary sibling, which replaces
    `path` only once complete, so a reader (or a crash) never sees half a file. A text file
    unless `binary`."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with (open(tmp, "wb") if binary else open(tmp, "w", encoding=encoding)) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def _write_json(path: Path, content: dict) -> None:
    path.write_text(json.dumps(content, indent=2, sort_keys=True, ensure_ascii=False, default=str) + "\n",
                    encoding="utf-8")


def _fsync_dir(path: Path) -> None:
    """Flush a directory's entries to disk (best effort: not every OS allows it)."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def sha256_of_file(path: Path) -> str:
    """The sha256 of a file's bytes, read now (no cache: a manifest check must see flipped bytes)."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def write_manifest(folder: str | os.PathLike) -> Path:
    """folder/manifest.json: {"files": {name: {"size", "sha256"}}} for every file in it."""
    folder = Path(folder)
    files = {p.name: {"size": p.stat().st_size, "sha256": sha256_of_file(p)}
             for p in sorted(folder.iterdir()) if p.is_file() and p.name != MANIFEST_NAME}
    _write_json(folder / MANIFEST_NAME, {"files": files})
    return folder / MANIFEST_NAME


def verify_folder(folder: str | os.PathLike, *, warn_unverified: bool = True) -> bool:
    """Check a folder's files against its manifest.json; True if verified, False (and a
    warning, with `warn_unverified`) if it has no manifest. Raises DamagedCheckpointError
    naming the first file that is missing, of the wrong size or with the wrong sha256."""
    folder = Path(folder)
    manifest_path = folder / MANIFEST_NAME
    if not manifest_path.is_file():
        if warn_unverified:
            warnings.warn(f"{folder} has no {MANIFEST_NAME} (written before bertedu checked checkpoints): "
                          "loading it unverified", stacklevel=3)
        return False
    try:
        files = json.loads(manifest_path.read_text(encoding="utf-8"))["files"]
    except (ValueError, KeyError, TypeError) as err:
        raise DamagedCheckpointError(f"{manifest_path} is damaged ({err}): the checkpoint cannot be verified; "
                                     "use an earlier checkpoint") from None
    for name, expected in files.items():
        path = folder / name
        if not path.is_file():
            raise DamagedCheckpointError(f"{path} is missing (the manifest lists it): use an earlier checkpoint")
        size = path.stat().st_size
        if size != expected["size"]:
            raise DamagedCheckpointError(f"{path} is damaged: {size:,} bytes, the manifest says "
                                         f"{expected['size']:,} (truncated?); use an earlier checkpoint")
        if sha256_of_file(path) != expected["sha256"]:
            raise DamagedCheckpointError(f"{path} is damaged: its sha256 differs from the manifest's "
                                         "(corrupted bytes); use an earlier checkpoint")
    return True


def _remove_stale_temporaries(out_dir: Path) -> None:
    """Temporary directories left by a crash while saving: never a valid checkpoint."""
    for p in out_dir.glob(f"{_TMP_PREFIX}*"):
        shutil.rmtree(p, ignore_errors=True)


# ---- loading ------------------------------------------------------------------------------
def load_checkpoint(
    path: str | os.PathLike,
    model: nn.Module,
    optimizer: Optional[torch.optim.Optimizer] = None,
) -> dict[str, Any]:
    """Load weights (and optimiser state) from a checkpoint directory; return its training state.

    path: a `checkpoint-<step>` directory, or an output directory (its latest checkpoint).
    model: the bare module, built with the same config as the checkpoint's.
    Raises CheckpointError when the checkpoint is missing or does not match, and its
    subclass DamagedCheckpointError when a file is missing or differs from the manifest.
    """
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"no checkpoint at {path}: check the path (train(..., resume=True) looks in out_dir).")
    if not (path / STATE_NAME).exists() and not _CHECKPOINT_RE.match(path.name):
        latest = latest_checkpoint(path)
        if latest is None:
            raise CheckpointError(f"{path} holds no checkpoint-<step> directory to load.")
        path = latest
    missing = [name for name in CHECKPOINT_FILES if not (path / name).is_file()]
    if missing:
        raise DamagedCheckpointError(
            f"checkpoint {path} is incomplete (missing {', '.join(missing)}): it was not written by "
            "bertedu.training.checkpoint.save_checkpoint or was damaged; load an earlier checkpoint."
        )
    verify_folder(path)
    _load_verified_weights(path, model)
    state = torch.load(path / STATE_NAME, map_location="cpu", weights_only=True)
    if optimizer is not None:
        try:
            optimizer.load_state_dict(state["optimizer"])
        except (ValueError, KeyError) as err:
            raise CheckpointError(
                f"the optimiser state in {path} does not fit this optimiser ({err}); "
                "were the parameter groups built the same way?"
            ) from err
    state["path"] = str(path)
    return state


def read_config(folder: str | os.PathLike) -> dict[str, Any]:
    """The model config saved in a checkpoint or weights folder, as a dict (without the keys
    that keep transformers from reading the folder, `FOLDER_MARK`)."""
    path = Path(folder) / CONFIG_NAME
    if not path.is_file():
        raise CheckpointError(f"{path} is missing: {folder} is not a folder of bertedu weights.")
    saved = json.loads(path.read_text(encoding="utf-8"))
    return {k: v for k, v in saved.items() if k not in FOLDER_MARK}


def load_weights(folder: str | os.PathLike, model: nn.Module) -> nn.Module:
    """Load `folder/model.safetensors` into `model` after checking `folder/config.json`
    against the model's config; a training checkpoint folder works too (its manifest, where
    there is one, is checked first). Returns the model."""
    verify_folder(folder, warn_unverified=False)  # a weights folder may have none
    return _load_verified_weights(folder, model)


def _load_verified_weights(folder: str | os.PathLike, model: nn.Module) -> nn.Module:
    folder = Path(folder)
    if not (folder / WEIGHTS_NAME).is_file():
        raise CheckpointError(f"{folder / WEIGHTS_NAME} is missing: {folder} holds no bertedu weights.")
    _check_config(folder, model)
    try:
        load_model(model, str(folder / WEIGHTS_NAME), strict=True, device=str(_device_of(model)))
    except RuntimeError as err:
        raise CheckpointError(f"the weights in {folder / WEIGHTS_NAME} do not fit this model: {err}") from err
    return model


def load_weights_into_new(folder: str | os.PathLike, build: Callable[[], nn.Module]) -> nn.Module:
    """`load_weights(folder, build())` without initialising weights only to overwrite them.

    `build()` runs on the meta device (shapes, no numbers); the file's tensors are then assigned
    to the parameters, so the model holds exactly the saved numbers (same checks as
    `load_weights`: manifest, config, every name and shape). Tied parameters (the MLM decoder
    and the word embeddings) stay one tensor. Introduced for `bertedu predict` (notebook 08's
    models, loaded from the command line).
    """
    verify_folder(folder, warn_unverified=False)
    folder = Path(folder)
    if not (folder / WEIGHTS_NAME).is_file():
        raise CheckpointError(f"{folder / WEIGHTS_NAME} is missing: {folder} holds no bertedu weights.")
    with torch.device("meta"):
        model = build()
    saved_names = set(model.state_dict())
    if any(b.is_meta for n, b in model.named_buffers() if n not in saved_names):
        # a buffer computed at build time and not saved (the CRF's constraints): build it for real
        return _load_verified_weights(folder, build())
    _check_config(folder, model)
    _assign_state(model, load_file(str(folder / WEIGHTS_NAME)), folder)
    return model


def _assign_state(model: nn.Module, state: dict[str, torch.Tensor], folder: Path) -> None:
    """Assign `state` to a meta-device `model`'s parameters and buffers, keeping tied ones tied."""
    expected = model.state_dict(keep_vars=True)
    tied: dict[int, list[str]] = {}
    for name, p in model.named_parameters(remove_duplicate=False):
        tied.setdefault(id(p), []).append(name)
    for names in tied.values():  # the file names a shared tensor once (safetensors drops the copies)
        saved = next((n for n in names if n in state), None)
        for n in names:
            if saved is not None:
                state.setdefault(n, state[saved])
    wrong = [k for k, v in state.items() if k in expected and v.shape != expected[k].shape]
    try:
        if wrong:
            raise RuntimeError(f"shapes differ for {wrong[:8]}")
        state = {k: v.to(expected[k].dtype) if k in expected else v for k, v in state.items()}
        model.load_state_dict(state, strict=True, assign=True)
    except RuntimeError as err:
        raise CheckpointError(f"the weights in {folder / WEIGHTS_NAME} do not fit this model: {err}") from err
    for names in tied.values():  # assign gave each name its own Parameter: tie them again
        first = model.get_parameter(names[0])
        for n in names[1:]:
            owner, _, leaf = n.rpartition(".")
            setattr(model.get_submodule(owner), leaf, first)


def _check_config(path: Path, model: nn.Module) -> None:
    saved = read_config(path)
    current = json.loads(json.dumps(model_config_dict(model), default=str))  # as it would be saved
    if not saved or not current:
        return  # a model without a dataclass config: the weights check below still runs
    differ = [
        f"{k}: checkpoint {saved.get(k)!r} vs model {current.get(k)!r}"
        for k in sorted(set(saved) | set(current))
        if k not in _CONFIG_FIELDS_NOT_COMPARED and saved.get(k) != current.get(k)
    ]
    if differ:
        raise CheckpointError(
            f"checkpoint {path} was made with a different model config ({'; '.join(differ)}); "
            "build the model with the checkpoint's config.json."
        )


def _device_of(model: nn.Module) -> torch.device:
    p = next(model.parameters(), None)
    return p.device if p is not None else torch.device("cpu")
