"""BERT, GPT and an ELMo-style model on the same windows, over several seeds (issue 38 item 4).

Notebook 17's recipe exactly (`bertedu.course.lm_study`: wiki-en's first 40 articles, the
2,000-piece vocabulary, windows of 32, the tiny presets without dropout, 400 steps of 32
windows, peak lr 2e-3), once per seed (the seed of the initialisation, the data order and the
masks), then on the 6 held-out articles:

- the middle-word fill, top-1 accuracy on the notebook's 132 sentences: BERT reading both sides
  at a [MASK], GPT the left side, the ELMo-style model its two one-direction guesses added (and
  each direction alone), against always answering the most frequent word; paired bootstrap
  standard errors of the differences, per seed;
- the two-sense probe (`lm_study.TWO_SENSES`: "may" and "left", 4 sentences per sense): the
  rank of the split by sense among the 35 ways to halve the 8 sentences, in the ELMo-style
  model's contextual vectors and in BERT tiny's last layer.

    python benchmarks/elmo_study.py --seeds 0,1,2 --json bertedu/weights/elmo_study.json
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
         ("ELMo-style, both sides", "ELMo-style, left LM"), ("GPT, left side", "BERT, both sides")]


def run_seed(seed: int, steps: int, data: dict) -> dict:
    """Train the three models at `seed`; their middle-word hits, paired differences and probe ranks."""
    import torch

    from bertedu.course import lm_study

    tokenizer, train_ids = data["tokenizer"], data["train_ids"]
    recipe = lm_study.study_recipe(steps=steps, seed=seed)
    models, tokens = {}, {}
    for kind in lm_study.KINDS:
        models[kind], run = lm_study.train_lm(kind, tokenizer, train_ids, recipe)
        tokens[kind] = run.tokens_seen
    assert len(set(tokens.values())) == 1, tokens  # the same tokens read by all three
    hits = lm_study.middle_word_hits(models, tokenizer, data["cloze"], data["always"])
    always = f"always {data['always']!r}"
    differences = {f"{a} - {b}": [float(hits[a].double().mean() - hits[b].double().mean()),
                                  lm_study.paired_se(hits[a], hits[b])] for a, b in [*PAIRS, ("BERT, both sides", always)]}
    encoders = {"ELMo-style": lambda b: models["elmo"].contextual(b["input_ids"], b["attention_mask"]),
                "BERT tiny": lambda b: models["bert"].bert(b["input_ids"], attention_mask=b["attention_mask"]).last_hidden_state}
    probe = {name: lm_study.probe_ranks(encode, tokenizer) for name, encode in encoders.items()}
    return {"tokens_seen": tokens["bert"], "accuracy": {k: float(h.float().mean()) for k, h in hits.items()},
            "differences": differences, "probe": probe}


def mean_sd(values: list[float]) -> str:
    sd = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"{statistics.mean(values):.3f} ± {sd:.3f}"


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
    parser.add_argument("--steps", type=int, default=400, help="notebook 17's 400; fewer only for a smoke test")
    parser.add_argument("--threads", type=int, default=2, help="notebook 17's 2 (the same rounding as the notebook)")
    parser.add_argument("--json", help="also write the numbers, the command and the machine here")
    args = parser.parse_args()
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from bertedu.course import lm_study

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer, train_ids, held_out_docs = lm_study.study_data(Path(workdir) / "vocab.txt")
        data = {"tokenizer": tokenizer, "train_ids": train_ids, "cloze": lm_study.cloze_sentences(tokenizer, held_out_docs),
                "always": lm_study.most_frequent_word(tokenizer, train_ids)}
        by_seed = {}
        for seed in args.seeds.split(","):
            print(f"seed {seed}: training BERT, GPT and the ELMo-style model, {args.steps} steps each", flush=True)
            by_seed[seed] = run_seed(int(seed), args.steps, data)
    record = {"steps": args.steps, "batch_size": 32, "window": lm_study.T, "vocab_size": len(tokenizer),
              "training_windows": len(train_ids), "sentences": len(data["cloze"]), "always": data["always"],
              "by_seed": by_seed,
              "command": " ".join(sys.argv).replace(sys.argv[0], f"python benchmarks/{Path(__file__).name}"),
              "machine": f"{platform.machine()}, torch {torch.__version__}, {args.threads} threads, "
                         f"CPU capability {torch.backends.cpu.get_cpu_capability()}"}
    print_tables(record)
    if args.json:
        Path(args.json).write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
