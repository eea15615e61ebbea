"""Does the distilled student keep the teacher's score? Fine-tune teacher and student the same
way (same task, data, steps, recipe, seeds) and compare test scores.

    python benchmarks/distill_table.py --student runs/distil/minilm-l3 --out runs/distil-ft
    python benchmarks/distill_table.py --student runs/distil/minilm-l3 --label soft --out runs/distil-ft \
        --student-extra "--teacher {teacher}"      # the student also learns from the fine-tuned teacher
    python benchmarks/distill_table.py ... --split dev   # dev scores: choose among recipes without reading test

Each run is one `bertedu finetune` command (printed), one after the other; a run whose
results.json exists is read, not repeated. The table gives mean ± sample standard deviation
over the seeds and the student's mean as a fraction of the teacher's. The speed side of the
comparison is `benchmarks/distill_speed.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

# task -> its fine-tuning flags: the README's MiniLM recipe (AdamW 1e-4, 10% warm-up), CPU-sized
TASKS = {
    "paraphrase-en": "--max-train 2000 --max-eval 500 --epochs 1 --max-seq-length 128 --lr 1e-4 --eval-every 20",
    "ner-en": "--max-eval 500 --epochs 3 --max-seq-length 64 --lr 1e-4 --eval-every 50",
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--teacher", default="minilm", help="--init of the teacher's fine-tunes")
    parser.add_argument("--student", required=True, help="a `bertedu distill --out` folder")
    parser.add_argument("--label", default="student", help="the student's name in its runs' folder names, so that "
                                                           "several students share one --out (and its teacher runs)")
    parser.add_argument("--tasks", default="paraphrase-en,ner-en")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--extra", default="", help="flags added to every command (later flags win)")
    parser.add_argument("--student-extra", default="", help="flags added to the student's commands only; "
                                                           "{teacher} stands for the teacher's fine-tuned run of the "
                                                           "same task and seed, e.g. \"--teacher {teacher}\"")
    parser.add_argument("--split", choices=("test", "dev"), default="test",
                        help="the split whose scores the table gives: dev for choosing among recipes, test for the "
                             "one recipe chosen")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()

    env = {**os.environ, "OMP_NUM_THREADS": str(args.threads)}
    rows = []
    for task in args.tasks.split(","):
        scores = {"teacher": [], "student": []}
        for seed in args.seeds.split(","):
            teacher_out = Path(args.out) / f"{task}-teacher-{seed}"
            for kind, init in (("teacher", args.teacher), ("student", args.student)):
                out = teacher_out if kind == "teacher" else Path(args.out) / f"{task}-{args.label}-{seed}"
                own = args.student_extra.format(teacher=teacher_out).split() if kind == "student" else []
                command = ["bertedu", "finetune", "--task", task, "--init", init, *TASKS[task].split(),
                           *args.extra.split(), *own, "--seed", seed, "--no-progress", "--out", str(out)]
                if not (out / "results.json").exists():
                    print(" ".join(command), flush=True)
                    subprocess.run([sys.executable, "-m", "bertedu.cli", *command[1:]], env=env, check=True,
                                   capture_output=True)
                results = json.loads((out / "results.json").read_text())
                scores[kind].append(results[args.split][results["main_metric"]])
        rows.append((task, scores))
    print(f"\n{args.split} scores")
    print(f"\n| task | teacher ({args.teacher}) | student ({args.student}) | student / teacher |\n|---|--:|--:|--:|")
    for task, s in rows:
        mean = {k: statistics.mean(v) for k, v in s.items()}
        sd = {k: statistics.stdev(v) if len(v) > 1 else 0.0 for k, v in s.items()}
        fmt = lambda k: f"{mean[k]:.3f} ± {sd[k]:.3f} ({', '.join(f'{x:.3f}' for x in s[k])})"
        kept = mean["student"] / mean["teacher"] if mean["teacher"] else float("nan")
        print(f"| {task} | {fmt('teacher')} | {fmt('student')} | **{kept:.1%}** |")


if __name__ == "__main__":
    main()
