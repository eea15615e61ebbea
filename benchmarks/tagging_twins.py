"""Does pretraining pay for tagging? Fine-tune the course's own pretrained model and its random
twin (the same size and vocabulary, random weights) with the same recipe and seeds, and compare
the test entity F1 seed by seed (a seed gives both arms the same head, data order and dropout).

    python benchmarks/tagging_twins.py --tasks ner-en,ner-zh --seeds 0,1,2 --threads 1 --out runs/tagging-twins --json bertedu/weights/tagging_twins.json

The recipes are benchmarks/crf_gap.py's softmax runs: ner-en from `course-en` (`mini`) for 10
epochs, ner-zh from `course-zh` (`tiny`) for notebook 09's 500 steps. Each run is one `bertedu
finetune` command (printed; a run whose results.json exists is read, not repeated). The record
keeps, per seed and arm, the test scores and the dev entity F1 at every evaluation (the curve),
and for the pretrained ner-en run of the first seed a few test tweets as word pieces with the
tag the model gave each piece: notebook 09 reads the words' tags back from their first pieces.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path

from crf_gap import TASKS
from finetune_runs import finetune_command, machine, run_finetune, set_threads, study_parser

PRESETS = {"course-en": "mini", "course-zh": "tiny"}  # the preset of each model's size: its random twin's


def one_run(task: str, init: str, seed: str, args) -> tuple[str, dict]:
    """(the command less --seed and --out, the run's numbers and dev curve), running it unless done."""
    flags = TASKS[task][1].split()
    if init == "random":
        flags = ["--preset", PRESETS[TASKS[task][0]], "--vocab", TASKS[task][0], *flags]
    out = Path(args.out) / f"{task}-{init}-{seed}"
    results = run_finetune(task, init, flags, seed, out, args.extra)
    curve = [(r["step"], round(r["eval_f1"], 4)) for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())
             if "eval_f1" in r]
    test = results["test"]
    numbers = {"f1": test["f1"], "precision": test["precision"], "recall": test["recall"],
               "steps": results["steps"], "best_step": results["best_step"], "dev_f1_curve": curve}
    return " ".join(finetune_command(task, init, flags, args.extra)) + " --seed SEED", numbers


def piece_examples(out: Path, limit: int = 3) -> list[dict]:
    """Test tweets, as word pieces, with the tag the fine-tuned model in `out` gave each piece:
    the first `limit` whose found entities include a word split into several pieces."""
    import torch

    from bertedu.data.tagging import encode_words, word_predictions
    from bertedu.data.task_data import load_task
    from bertedu.training.finetune import FinetuneConfig, load_finetuned
    from bertedu.training.metrics import bio_entities

    model, tokenizer, info = load_finetuned(out)
    cfg = FinetuneConfig(**json.loads((out / "results.json").read_text())["config"])
    task = load_task(cfg.task, seed=cfg.data_seed).subsample(cfg.max_train, cfg.max_eval, cfg.data_seed)
    chosen = []
    for e in task.test:
        enc = encode_words(tokenizer, e.tokens, max_length=cfg.max_seq_length)
        with torch.no_grad():
            logits = model(torch.tensor([enc.input_ids]), attention_mask=torch.tensor([enc.attention_mask])).logits[0]
        piece_tags = [info["labels"][i] for i in logits.argmax(-1).tolist()]  # (T,) one tag per piece
        words = [info["labels"][i] for i in word_predictions(logits, enc.word_ids, len(e.tokens), fill=0)]
        found = bio_entities(words) & bio_entities(e.tags)
        if any(enc.word_ids.count(w) > 1 for _, a, b in found for w in range(a, b + 1)):
            chosen.append({"words": e.tokens, "gold": e.tags, "pieces": enc.tokens, "word_ids": enc.word_ids,
                           "piece_tags": piece_tags, "word_tags": words})
        if len(chosen) == limit:
            break
    return chosen


def main() -> None:
    parser = study_parser(__doc__.split("\n\n")[0], threads=1)
    parser.add_argument("--tasks", default="ner-en,ner-zh")
    args = parser.parse_args()
    set_threads(args.threads)  # this process runs the fine-tuning
    seeds = args.seeds.split(",")
    record = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else {}
    for task in args.tasks.split(","):
        init = TASKS[task][0]
        entry = {"task": task, "init": init, "seeds": [int(s) for s in seeds], "commands": {},
                 "pretrained": [], "random": []}
        for seed in seeds:
            for arm, arm_init in (("pretrained", init), ("random", "random")):
                entry["commands"][arm], numbers = one_run(task, arm_init, seed, args)
                entry[arm].append(numbers)
        gaps = [p["f1"] - r["f1"] for p, r in zip(entry["pretrained"], entry["random"])]
        entry["gap"] = {"per_seed": gaps, "mean": statistics.mean(gaps),
                        "se": statistics.stdev(gaps) / len(gaps) ** 0.5 if len(gaps) > 1 else 0.0}
        if task == "ner-en":
            entry["pieces"] = piece_examples(Path(args.out) / f"{task}-{init}-{seeds[0]}")
        print(f"{task}: from {init} {[round(x['f1'], 3) for x in entry['pretrained']]}, "
              f"from random {[round(x['f1'], 3) for x in entry['random']]}, "
              f"gap {entry['gap']['mean']:+.3f} (standard error {entry['gap']['se']:.3f})", flush=True)
        entry.update(threads=args.threads, machine=machine(), metric="test entity F1",
                     command=f"python benchmarks/tagging_twins.py --tasks {task} --seeds {args.seeds} "
                             f"--threads {args.threads} --out {args.out}" + (f" --json {args.json}" if args.json else "")
                             + (f" --extra '{args.extra}'" if args.extra else ""))
        record[f"{init}/{task}"] = entry
        if args.json:
            Path(args.json).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
