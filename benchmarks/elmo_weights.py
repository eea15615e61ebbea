"""Train one of notebook 17's models and ship it: the ELMo-style model (bertedu/weights/elmo-study/), BERT
(lm-study-bert/) or GPT (lm-study-gpt/).

The same recipe exactly (`bertedu.course.lm_study`: wiki-en's first 40 articles, the 2,000-piece study
vocabulary, windows of 32, the tiny preset without dropout, 400 steps of 32 windows, seed 0) at each model's
own peak learning rate (`lm_study.STUDY_LR`, chosen by the sweep of `benchmarks/elmo_study.py --sweep`),
trained once here instead of in every run of the notebook: notebook 17 reads its BERT and GPT and trains only
their first steps live (against the shipped runs' first losses), its appendix reads the ELMo-style model.
`lm_study.load_lm` checks each file's sha256 against manifest.json, and the vocabulary, recipe and shape
against the notebook's.

    python benchmarks/elmo_weights.py --kind elmo --out bertedu/weights/elmo-study --threads 1
    python benchmarks/elmo_weights.py --kind bert --out bertedu/weights/lm-study-bert --threads 2
    python benchmarks/elmo_weights.py --kind gpt --out bertedu/weights/lm-study-gpt --threads 2

(the notebook runs on two threads; CPUs of other makes, or another thread count, change the last bits.)

`--steps` fewer than 400 is for a smoke test only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kind", default="elmo", choices=("elmo", "bert", "gpt"), help="which of the study's models")
    parser.add_argument("--out", required=True, help="the folder to write (lm_study.WEIGHTS[kind] to ship it)")
    parser.add_argument("--steps", type=int, default=400, help="notebook 17's 400; fewer only for a smoke test")
    parser.add_argument("--seed", type=int, default=0, help="notebook 17's 0")
    parser.add_argument("--threads", type=int, default=2, help="notebook 17's 2")
    parser.add_argument("--lr", type=float, default=None, help="the peak rate; default the kind's lm_study.STUDY_LR")
    parser.add_argument("--log-dir", default=None, help="a folder for the loop's metrics.jsonl while it runs "
                        "(and its last checkpoint); default none")
    parser.add_argument("--resume", action="store_true", help="go on from --log-dir's latest checkpoint")
    parser.add_argument("--save-every", type=int, default=0, help="a checkpoint in --log-dir every N steps (0: the last only)")
    parser.add_argument("--articles", default="study", choices=("study", "all"),
                        help="study: the 40 articles notebook 17 trains on; all: those and wiki-en's articles 50-101 "
                             "(lm_study.long_text; the vocabulary is the study's either way)")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from bertedu.course import lm_study
    from finetune_runs import machine

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer, train_ids, _ = lm_study.study_data(Path(workdir) / "vocab.txt")
        if args.articles == "all":
            train_ids = lm_study.windows(tokenizer, lm_study.long_text())
        overrides = {} if args.lr is None else {"lr": args.lr}
        overrides.update({"out": args.log_dir, "save_every": args.save_every} if args.log_dir else {})
        recipe = lm_study.study_recipe(steps=args.steps, seed=args.seed, kind=args.kind, **overrides)
        model, run = lm_study.train_lm(args.kind, tokenizer, train_ids, recipe, resume=args.resume)
        command = " ".join(["python benchmarks/elmo_weights.py", *(argv if argv is not None else sys.argv[1:])])
        folder = lm_study.save_lm(model, run, recipe, tokenizer, args.out, command,
                                    f"{machine()}, {args.threads} threads")
    print(f"{folder}: {args.kind} model, {run.step} steps, {run.tokens_seen:,} tokens, last loss {run.loss:.3f}")
    return folder


if __name__ == "__main__":
    main()
