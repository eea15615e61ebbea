"""Train notebook 17's ELMo-style model and ship it (bertedu/weights/elmo-study/).

Notebook 17 trains its BERT and GPT live and reads the ELMo-style model from this folder: the same
recipe exactly (`bertedu.course.lm_study`: wiki-en's first 40 articles, the 2,000-piece study
vocabulary, windows of 32, the tiny preset without dropout, 400 steps of 32 windows, seed 0)
at the ELMo-style model's own peak learning rate (`lm_study.STUDY_LR["elmo"]`, chosen by the sweep of
`benchmarks/elmo_study.py --sweep`), trained once here instead of in every run of the notebook (its
training cell went from 57.7 s to 32.4 s on a 2-core Intel Xeon: benchmarks/RESULTS.md). `lm_study.load_elmo` checks each file's sha256
against manifest.json and that the notebook's vocabulary is the one trained on.

    python benchmarks/elmo_weights.py --out bertedu/weights/elmo-study --threads 1

(one thread: on a shared machine two threads wait on each other; the notebook's 2 only change last bits.)

`--steps` fewer than 400 is for a smoke test only.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path


def main(argv=None) -> Path:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", required=True, help="the folder to write (bertedu/weights/elmo-study to ship it)")
    parser.add_argument("--steps", type=int, default=400, help="notebook 17's 400; fewer only for a smoke test")
    parser.add_argument("--seed", type=int, default=0, help="notebook 17's 0")
    parser.add_argument("--threads", type=int, default=2, help="notebook 17's 2")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    import torch

    from bertedu.course import lm_study
    from finetune_runs import machine

    torch.set_num_threads(args.threads)
    with tempfile.TemporaryDirectory() as workdir:
        tokenizer, train_ids, _ = lm_study.study_data(Path(workdir) / "vocab.txt")
        recipe = lm_study.study_recipe(steps=args.steps, seed=args.seed, kind="elmo")
        model, run = lm_study.train_lm("elmo", tokenizer, train_ids, recipe)
        command = " ".join(["python benchmarks/elmo_weights.py", *(argv if argv is not None else sys.argv[1:])])
        folder = lm_study.save_elmo(model, run, recipe, tokenizer, args.out, command,
                                    f"{machine()}, {args.threads} threads")
    print(f"{folder}: ELMo-style model, {run.step} steps, {run.tokens_seen:,} tokens, last loss {run.loss:.3f}")
    return folder


if __name__ == "__main__":
    main()
