"""Time the README's command-line examples as a new user runs them.

Reads the bash block under README.md's "## The command line", runs each command once, in order,
through bash in one fresh folder (so `predict runs/para` finds the fine-tune before it), with the
environment a user has (no OMP_WAIT_POLICY set: the CLI sets its own), and prints a table of wall
times with the load average before and after each, so a reader can tell a quiet run from a busy one.

    python benchmarks/readme_times.py [--out DIR] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def readme_commands(readme: Path = ROOT / "README.md") -> list[str]:
    """The commands of the README's command-line block, continuation lines joined, comments kept
    apart: [(command, the README's comment)]."""
    text = readme.read_text(encoding="utf-8")
    block = re.search(r"## The command line.*?```bash\n(.*?)```", text, re.S).group(1)
    joined = re.sub(r"\\\n\s*", "", block)
    return [line.strip() for line in joined.splitlines() if line.strip()]


def run(line: str, folder: Path) -> dict:
    command, _, stated = line.partition("  #")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    before = os.getloadavg()[0]
    start = time.perf_counter()
    done = subprocess.run(["bash", "-c", command.strip()], cwd=folder, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"{command.strip()} failed ({done.returncode}):\n{done.stderr[-2000:]}")
    return {"command": command.strip(), "readme_says": stated.strip(" #"), "wall_s": round(wall, 1),
            "load_before": round(before, 2), "load_after": round(os.getloadavg()[0], 2),
            "last_line": done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""}


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", help="the fresh folder to run in (default: a new temporary one)")
    parser.add_argument("--json", help="write the rows here too")
    args = parser.parse_args(argv)
    folder = Path(args.out or tempfile.mkdtemp(prefix="readme-times-"))
    folder.mkdir(parents=True, exist_ok=True)
    rows = []
    for line in readme_commands():
        rows.append(run(line, folder))
        r = rows[-1]
        print(f"| `{r['command'].split(' --')[0]}` | {r['readme_says']} | {r['wall_s']} s | "
              f"{r['load_before']} -> {r['load_after']} |", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
