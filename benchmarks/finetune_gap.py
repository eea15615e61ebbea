"""Does pretraining pay? Fine-tune from a pretrained model and from random weights (same
vocabulary, same size, same commands, several seeds) and compare test scores.

Each run is one `bertedu finetune` command (printed), run one after the other in this process
(benchmarks/finetune_runs.run_finetune). The table gives mean ± sample standard deviation over
the seeds and the gap in units of the larger of the two standard deviations.

    python benchmarks/finetune_gap.py --init course-zh --tasks sentiment-zh,ner-zh --out runs/gap-zh

`--init minilm` compares the real all-MiniLM-L6-v2 with random weights of its shape
(`--preset minilm`, its vocabulary). `--json FILE` also writes the scores, the commands and
the machine: the record notebooks 08, 10 and 11 read (bertedu/weights/finetune_gap.json).
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from finetune_runs import finetune_command, machine, run_finetune, set_threads, study_parser

# task -> the flags of its CPU-sized fine-tune (the notebooks' settings, shortened)
TASKS = {
    "sentiment-zh": "--max-train 2000 --max-eval 300 --epochs 2 --batch-size 32 --lr 2e-3 --max-seq-length 32",
    "topic-en": "--max-train 600 --max-eval 300 --epochs 3 --batch-size 32 --lr 1e-4 --max-seq-length 32",
    "ner-zh": "--max-train 4000 --max-eval 300 --epochs 1 --batch-size 8 --lr 1e-3 --max-seq-length 64 --eval-every 125",
    "ner-en": "--max-train 2000 --max-eval 300 --epochs 2 --batch-size 16 --lr 1e-3 --max-seq-length 64",
    "paraphrase-en": "--max-train 2000 --max-eval 300 --epochs 2 --batch-size 32 --lr 1e-3 --max-seq-length 64",
    "qa-cloze-en": "--max-train 1000 --max-eval 300 --epochs 2 --batch-size 16 --lr 5e-4 --max-seq-length 128 "
                   "--doc-stride 48",
}


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)  # --json: merged into an existing file
    parser.add_argument("--init", required=True, help="a shipped masked LM name or a bertedu pretrain folder")
    parser.add_argument("--tasks", default="sentiment-zh,ner-zh")
    args = parser.parse_args()
    set_threads(args.threads)  # this process runs the fine-tuning
    from bertedu.pretrained import MASKED_LMS, masked_lm_dir, masked_lm_vocab_path

    if args.init == "minilm":
        from bertedu.pretrained import minilm_vocab_path

        vocab, preset_of = minilm_vocab_path(), None
        vocab_name, vocab_source = "MINILM_VOCAB", "bertedu.pretrained.minilm_vocab_path()"
    elif args.init in MASKED_LMS:
        vocab, preset_of = masked_lm_vocab_path(args.init), masked_lm_dir(args.init)
        vocab_name = f"{args.init.upper().replace('-', '_')}_VOCAB"
        vocab_source = f"bertedu.pretrained.masked_lm_vocab_path({args.init!r})"
    else:
        vocab, preset_of = Path(args.init) / "vocab.txt", Path(args.init)
        vocab_name = vocab_source = str(vocab)
    from bertedu.model.config import PRESETS, BertConfig

    shape = lambda c: (c["hidden_size"], c["num_hidden_layers"], c["num_attention_heads"], c["intermediate_size"])
    if preset_of is None:
        preset = "minilm"
    else:  # random weights of the same size: the preset whose shape the pretrained model has
        size = json.loads(next(preset_of.rglob("config.json")).read_text())
        preset = next((name for name in PRESETS if shape(vars(BertConfig.preset(name))) == shape(size)), None)
    if preset is None:
        raise SystemExit(f"{args.init}: its size {shape(size)} is no preset, so random weights of the same size "
                         f"cannot be made by --preset (presets: {', '.join(PRESETS)})")
    rows, commands = [], {}
    for task in args.tasks.split(","):
        scores = {"pretrained": [], "random": []}
        for seed in args.seeds.split(","):
            for kind, init, flags in (("pretrained", args.init, []),
                                      ("random", "random", ["--preset", preset, "--vocab", str(vocab)])):
                flags = [*flags, *TASKS[task].split()]
                results = run_finetune(task, init, flags, seed, Path(args.out) / f"{task}-{kind}-{seed}", args.extra)
                shown = " ".join(finetune_command(task, init, flags, args.extra)).replace(str(vocab), vocab_name)
                commands.setdefault(task, {}).setdefault(kind, shown + " --seed SEED")  # no local path
                scores[kind].append(results["test"][results["main_metric"]])
        rows.append((task, scores))
    print("\n| task | from " + args.init + " | from random | gap | gap / sd |\n|---|--:|--:|--:|--:|")
    for task, s in rows:
        mean = {k: statistics.mean(v) for k, v in s.items()}
        sd = {k: statistics.stdev(v) if len(v) > 1 else 0.0 for k, v in s.items()}
        gap = mean["pretrained"] - mean["random"]
        ratio = gap / max(sd.values()) if max(sd.values()) > 0 else float("inf")
        fmt = lambda k: f"{mean[k]:.3f} ± {sd[k]:.3f} ({', '.join(f'{x:.3f}' for x in s[k])})"
        print(f"| {task} | {fmt('pretrained')} | {fmt('random')} | {gap:+.3f} | {ratio:.1f} |")
    if args.json:
        write_record(Path(args.json), args, rows, commands, f"{vocab_name}: {vocab_source}")


def write_record(path: Path, args, rows, commands, vocab_note: str) -> None:
    """Merge this run's scores into the JSON record at `path`: {"INIT/TASK": {...}}."""
    record = json.loads(path.read_text()) if path.exists() else {}
    for task, scores in rows:
        record[f"{args.init}/{task}"] = {
            "task": task, "init": args.init, "seeds": [int(s) for s in args.seeds.split(",")],
            "metric": "test " + ("entity F1" if task.startswith("ner") else "F1" if task.startswith("qa") else "accuracy"),
            "pretrained": scores["pretrained"], "random": scores["random"],
            "commands": commands[task], "threads": args.threads,
            "vocab": vocab_note,
            "command": f"python benchmarks/finetune_gap.py --init {args.init} --tasks {task} --seeds {args.seeds} "
                       f"--threads {args.threads} --out {args.out} --json {path}" + (f" --extra '{args.extra}'" if args.extra else ""),
            "machine": machine(),
        }
    path.write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
