"""BERT, GPT and an ELMo-style model on the same windows: a learning-rate sweep, then several seeds.

The sweep (--sweep, issue 50): each kind trained at each peak learning rate, seed 0, notebook 17's
400 steps, and scored on 4 validation articles (wiki-en's 46-49, `lm_study.validation_text`) that the
comparisons never read: BERT's loss at [MASK] positions (and on all its targets), GPT's next-token
loss, the ELMo-style model's forward and backward losses. The rate with the lowest loss (the
measure `lm_study.SELECTED_BY` names) is each kind's; `lm_study.STUDY_LR` must hold it (a test checks).

    python benchmarks/elmo_study.py --sweep 1e-3,2e-3,5e-3,1e-2,2e-2 --threads 1 --json bertedu/weights/elmo_study.json

The seeds: notebook 17's recipe exactly (`bertedu.course.lm_study`: wiki-en's first 40 articles, the
2,000-piece vocabulary, windows of 32, the tiny presets without dropout, 400 steps of 32
windows, each kind at its STUDY_LR), once per seed (the seed of the initialisation, the data order and the
masks), then on the 6 held-out articles:

- the middle-word fill, top-1 accuracy on the notebook's 132 sentences: BERT reading both sides
  at a [MASK], GPT the left side, the ELMo-style model its two one-direction guesses added (and
  each direction alone), against always answering the most frequent word; paired bootstrap
  standard errors of the differences, per seed;
- the two-sense probe (`lm_study.TWO_SENSES`: "may" and "left", 4 sentences per sense): the
  rank of the split by sense among the 35 ways to halve the 8 sentences, in the ELMo-style
  model's contextual vectors and in BERT tiny's last layer;
- held-out losses on the first 64 held-out windows (the notebook's): GPT's and the ELMo-style forward
  LM's next-token loss, BERT's loss at [MASK] positions, beside the piece counts (unigram, bigram).

    python benchmarks/elmo_study.py --seeds 0,1,2 --json bertedu/weights/elmo_study.json

Each part replaces only its own keys of an existing --json record ("lr_sweep", or the seeds' keys).
"""

from __future__ import annotations

import argparse
import json
import platform
import statistics
import sys
import tempfile
from pathlib import Path

PAIRS = [("ELMo-style, both sides", "BERT, both sides"), ("ELMo-style, both sides", "GPT, left side"),
         ("ELMo-style, both sides", "ELMo-style, left LM"), ("GPT, left side", "BERT, both sides"),
         ("GPT, left side", "bigram, left piece"), ("ELMo-style, both sides", "bigram, both neighbours"),
         ("BERT, both sides", "bigram, both neighbours")]


def sweep(rates: list[float], steps: int, data: dict, kinds: list[str], before: dict | None = None) -> dict:
    """Each of `kinds` at each rate, seed 0: its held-out measures on the validation windows, and each kind's
    chosen rate. `before`: an earlier sweep's record, whose rates and losses this one extends."""
    from bertedu.course import lm_study
    from bertedu.training.loop import TrainingDivergedError

    losses = {kind: dict(by_rate) for kind, by_rate in (before or {}).get("losses", {}).items()}
    chosen = {}
    for kind in kinds:
        losses.setdefault(kind, {})
        for lr in rates:
            print(f"sweep: {kind} at lr {lr:g}, {steps} steps", flush=True)
            try:
                model, _ = lm_study.train_lm(kind, data["tokenizer"], data["train_ids"],
                                             lm_study.study_recipe(steps=steps, seed=0, lr=lr))
                losses[kind][f"{lr:g}"] = lm_study.held_out_measures(kind, model, data["tokenizer"], data["validation_ids"])
            except TrainingDivergedError:
                losses[kind][f"{lr:g}"] = None  # diverged: no model to score
    for kind in losses:
        losses[kind] = dict(sorted(losses[kind].items(), key=lambda item: float(item[0])))
        scored = {lr: m[lm_study.SELECTED_BY[kind]] for lr, m in losses[kind].items() if m is not None}
        chosen[kind] = float(min(scored, key=scored.get))
    rates = sorted({*rates, *(before or {}).get("rates", [])})
    return {"rates": rates, "steps": steps, "seed": 0, "validation_windows": len(data["validation_ids"]),
            "selected_by": lm_study.SELECTED_BY, "losses": losses, "chosen": chosen}


def run_seed(seed: int, steps: int, data: dict) -> dict:
    """Train the three models at `seed`; their middle-word hits, paired differences and probe ranks."""
    import torch

    from bertedu.course import lm_study

    tokenizer, train_ids = data["tokenizer"], data["train_ids"]
    models, tokens = {}, {}
    for kind in lm_study.KINDS:
        recipe = lm_study.study_recipe(steps=steps, seed=seed, kind=kind)
        models[kind], run = lm_study.train_lm(kind, tokenizer, train_ids, recipe)
        tokens[kind] = run.tokens_seen
    assert len(set(tokens.values())) == 1, tokens  # the same tokens read by all three
    hits = lm_study.middle_word_hits(models, tokenizer, data["cloze"], data["always"], data["bigram"])
    always = f"always {data['always']!r}"
    differences = {f"{a} - {b}": [float(hits[a].double().mean() - hits[b].double().mean()),
                                  lm_study.paired_se(hits[a], hits[b])] for a, b in [*PAIRS, ("BERT, both sides", always)]}
    encoders = {"ELMo-style": lambda b: models["elmo"].contextual(b["input_ids"], b["attention_mask"]),
                "BERT tiny": lambda b: models["bert"].bert(b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state}
    probe = {name: lm_study.probe_ranks(encode, tokenizer) for name, encode in encoders.items()}
    scored = data["held_out_ids"][:64]
    masked = lm_study.masked_lm_losses(models["bert"], tokenizer, scored)
    losses = {"GPT, next piece": float(lm_study.next_token_losses(models["gpt"], scored).mean()),
              "ELMo-style forward LM, next piece": float(lm_study.next_token_losses(models["elmo"], scored).mean()),
              "bigram, next piece": float(data["bigram"].next_token_losses(scored).mean()),
              "BERT, [MASK] pieces": float(masked["loss"][masked["shown"] == 0].mean())}
    return {"tokens_seen": tokens["bert"], "lr": {k: lm_study.STUDY_LR[k] for k in lm_study.KINDS},
            "accuracy": {k: float(h.float().mean()) for k, h in hits.items()},
            "differences": differences, "probe": probe, "held_out_loss": losses}


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


def print_sweep(record: dict) -> None:
    swept = record["lr_sweep"]
    print(f"\nlearning-rate sweep: held-out loss on {swept['validation_windows']} validation windows, seed 0, "
          f"{swept['steps']} steps\n\n| model | measure | " + " | ".join(f"{lr:g}" for lr in swept["rates"]) + " | chosen |")
    print("|---|---|" + "--:|" * (len(swept["rates"]) + 1))
    for kind, by_rate in swept["losses"].items():
        measures = next(m for m in by_rate.values() if m is not None)
        for measure in measures:
            ran = [by_rate.get(f"{lr:g}", "-") for lr in swept["rates"]]
            cells = ["-" if m == "-" else "diverged" if m is None else f"{m[measure]:.3f}" for m in ran]
            print(f"| {kind} | {measure} | {' | '.join(cells)} | {swept['chosen'][kind]:g} |")


def print_tables(record: dict) -> None:
    seeds = list(record["by_seed"])
    runs = [record["by_seed"][s] for s in seeds]
    print(f"\nmiddle-word fill, top-1 accuracy on {record['sentences']} held-out sentences, seeds {', '.join(seeds)}, "
          f"{record['steps']} steps\n\n| reader | mean ± sd | per seed |\n|---|--:|--:|")
    for name in runs[0]["accuracy"]:
        values = [r["accuracy"][name] for r in runs]
        print(f"| {name} | {mean_sd(values)} | {', '.join(f'{v:.3f}' for v in values)} |")
    print("\n| difference | mean ± sd | per seed (standard errors) |\n|---|--:|--:|")
    for name in runs[0]["differences"]:
        values = [r["differences"][name] for r in runs]
        per_seed = ", ".join(f"{d:+.3f} ({d / se:+.1f})" if se > 0 else f"{d:+.3f} (-)" for d, se in values)
        print(f"| {name} | {mean_sd([d for d, _ in values])} | {per_seed} |")
    print("\ntwo-sense probe: rank of the split by sense among the 35 halvings (1 = the clearest), per seed\n\n"
          "| model | word | ranks | sense gap, mean ± sd |\n|---|---|--:|--:|")
    for model in runs[0]["probe"]:
        for word in runs[0]["probe"][model]:
            values = [r["probe"][model][word] for r in runs]
            print(f"| {model} | {word} | {', '.join(str(rank) for _, rank in values)} | {mean_sd([g for g, _ in values])} |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--sweep", help="comma-separated peak learning rates: run the sweep instead of the seeds")
    parser.add_argument("--kinds", default="bert,gpt,elmo",
                        help="the kinds to sweep; fewer than all three extends the record's earlier sweep")
    parser.add_argument("--steps", type=int, default=400, help="notebook 17's 400; fewer only for a smoke test")
    parser.add_argument("--threads", type=int, default=2, help="notebook 17's 2 (the same rounding as the notebook)")
    parser.add_argument("--json", help="also write the numbers, the command and the machine here")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from bertedu.course import lm_study
    from bertedu.course.ngram import BigramLM

    torch.set_num_threads(args.threads)
    command = " ".join(sys.argv).replace(sys.argv[0], f"python benchmarks/{Path(__file__).name}")
    machine = (f"{platform.machine()}, torch {torch.__version__}, {args.threads} threads, "
               f"CPU capability {torch.backends.cpu.get_cpu_capability()}")
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer, train_ids, held_out_docs = lm_study.study_data(Path(workdir) / "vocab.txt")
        data = {"tokenizer": tokenizer, "train_ids": train_ids, "cloze": lm_study.cloze_sentences(tokenizer, held_out_docs),
                "always": lm_study.most_frequent_word(tokenizer, train_ids),
                "bigram": BigramLM.from_windows(train_ids, len(tokenizer)),
                "held_out_ids": lm_study.windows(tokenizer, held_out_docs),
                "validation_ids": lm_study.windows(tokenizer, lm_study.validation_text())}
        record = json.loads(Path(args.json).read_text()) if args.json and Path(args.json).exists() else {}
        if args.sweep:
            rates, kinds = [float(lr) for lr in args.sweep.split(",")], args.kinds.split(",")
            before = record.get("lr_sweep") if set(kinds) != set(lm_study.KINDS) else None
            swept = sweep(rates, args.steps, data, kinds, before)
            runs = {"command": command, "machine": machine} if before is None else {
                "command": before["command"], "machine": before["machine"],
                "extended_by": [*before.get("extended_by", []), f"{command} ({machine})"]}
            record["lr_sweep"] = {**swept, **runs}
            print_sweep(record)
        else:
            by_seed = {}
            for seed in args.seeds.split(","):
                print(f"seed {seed}: training BERT, GPT and the ELMo-style model, {args.steps} steps each", flush=True)
                by_seed[seed] = run_seed(int(seed), args.steps, data)
            record.update({"steps": args.steps, "batch_size": 32, "window": lm_study.T, "vocab_size": len(tokenizer),
                           "training_windows": len(train_ids), "sentences": len(data["cloze"]),
                           "always": data["always"], "by_seed": by_seed, "command": command, "machine": machine})
            print_tables(record)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
