"""The maintainers' commands that keep the Chinese edition (notebooks/zh/) in step with the English lessons.

    python -m bertedu.course.editions check             # what is out of step, lesson by lesson
    python -m bertedu.course.editions sync              # carry the English code cells over
    python -m bertedu.course.editions run [--write]     # execute the own cells (--write: store outputs)
    python -m bertedu.course.editions dump 08 > 08.md   # a lesson as one text file to write prose in
    python -m bertedu.course.editions load 08 < 08.md   # ... and back into notebooks/zh/

What the cells of an edition are and how they are checked: `bertedu.course.edition_cells`; the text file:
`bertedu.course.edition_text`; the own cells' run: `bertedu.course.edition_run`. Learners never need these.
"""

from __future__ import annotations

import argparse
from typing import Sequence

from . import edition_text
from .edition_cells import (EDITIONS, ENGLISH, differences, english_of, is_own, lesson_path, lessons,  # noqa: F401
                            replaced_id, sha, sync)
from .edition_run import run


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bertedu.course.editions", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("check", help="what is out of step, lesson by lesson")
    sub.add_parser("sync", help="carry the English code cells over")
    p = sub.add_parser("run", help="execute every own cell in a fresh kernel and compare its outputs")
    p.add_argument("--write", action="store_true", help="store the fresh outputs instead of comparing")
    p.add_argument("lessons", nargs="*", help="lesson numbers (default: all)")
    for name in ("dump", "load"):
        sub.add_parser(name, help=f"{name} a lesson as one text file (stdin/stdout)").add_argument("lesson")
    args = parser.parse_args(argv)
    if args.command in ("dump", "load"):
        return edition_text.main(args.command, args.lesson)
    if args.command == "run":
        paths = [lesson_path(n) for n in args.lessons] if args.lessons else lessons()
        problems = run(paths, write=args.write)
    else:
        problems = [p for path in lessons() for p in (differences(path) if args.command == "check" else
                                                       [f"{path.name}: {c}" for c in sync(path)])]
    print("\n".join(problems) or f"{len(lessons())} lessons in step")
    return 1 if problems and args.command != "sync" else 0


if __name__ == "__main__":
    raise SystemExit(main())
