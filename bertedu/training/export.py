"""A finished `bertedu pretrain` run as a shipped masked LM folder (`bertedu/weights/NAME`),
the way the course models were made; `bertedu.pretrained` loads such a folder by name and
checks its sha256s.

    python -m bertedu.training.export export RUN bertedu/weights/NAME --command '<the pretrain command>'
"""

from __future__ import annotations

import json
from pathlib import Path

from ..data.corpora import file_sha256
from ..model.constants import MERGES_NAME, VOCAB_NAME
from .checkpoint import latest_checkpoint


def export_pretrain_run(run: str | Path, to: str | Path, command: str, *, name: str | None = None,
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
        raise FileNotFoundError(f"{run} holds no checkpoint-<step> folder to export")
    to.mkdir(parents=True, exist_ok=True)
    files = [(checkpoint / "model.safetensors", "model.safetensors"), (checkpoint / "config.json", "config.json"),
             (run / VOCAB_NAME, "vocab.txt"), (run / "run.json", "run.json")]
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
    run_settings = json.loads((run / "run.json").read_text(encoding="utf-8"))
    (to / "COMMAND.md").write_text(
        f"# {name or to.name}: how these weights were made\n\n"
        f"Pretrained from random weights by one `bertedu pretrain` command ({checkpoint.name} of the run):\n\n"
        "```\n" + command + "\n```\n\nexported with\n\n```\n"
        f"python -m bertedu.training.export {run} {to}{' --half' if half else ''} --command '<the command above>'\n```\n\n"
        "The run's settings (run.json):\n\n```json\n" + json.dumps(run_settings, indent=2) + "\n```\n",
        encoding="utf-8")
    return to


def main(argv=None) -> int:
    import argparse

    parser = argparse.ArgumentParser(prog="python -m bertedu.training.export",
                                     description="Export a bertedu pretrain run as a shipped masked LM folder.")
    sub = parser.add_subparsers(dest="action", required=True)
    export = sub.add_parser("export", help="a run's last checkpoint -> bertedu/weights/NAME")
    export.add_argument("run")
    export.add_argument("to")
    export.add_argument("--command", required=True, help="the bertedu pretrain command that made the run")
    export.add_argument("--half", action="store_true", help="store the weights in fp16 (half the bytes)")
    args = parser.parse_args(argv)
    print(export_pretrain_run(args.run, args.to, args.command, half=args.half))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
