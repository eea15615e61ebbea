"""Measure a minilm-mlm recipe run (`bertedu pretrain --init-from minilm --packing documents ...`,
bertedu/weights/minilm-mlm/COMMAND.md) the way the shipped minilm-mlm is measured: its newest
checkpoint's weights through fp16 and back (as `python -m bertedu.training.ship ... --minilm`
ships them; the frozen word embeddings stay MiniLM's), all 298 held-out sequences
(`bertedu.training.heldout.masked_accuracy`), and the 26 probes and 8 one-word-changed pairs
of tests/test_pretrained.py. A shipped name (minilm-mlm) is measured as it is.

    python benchmarks/minilm_mlm_eval.py runs/minilm-mlm-new-r15a-seed0
    python benchmarks/minilm_mlm_eval.py RUN 8     # the first 8 held-out sequences only (a smoke test)
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_pretrained import PAIRS, PROBES, mask_probability, top5  # noqa: E402

from bertedu.pretrained import MASKED_LMS  # noqa: E402
from bertedu.training.ship import trainable_state  # noqa: E402
from bertedu.training.heldout import masked_accuracy  # noqa: E402
from bertedu.training.pretrain import load_masked_lm_or_run  # noqa: E402


def main(run: str, max_sequences: int | None = None) -> None:
    torch.set_num_threads(2)
    model, tokenizer = load_masked_lm_or_run(run)
    if run not in MASKED_LMS:  # a run: its weights as they would ship, through fp16 and back
        state = {k: v.half().float() for k, v in trainable_state(model.state_dict()).items()}
        model.load_state_dict(state, strict=False)  # the word embeddings stay MiniLM's own

    held_out = masked_accuracy(model, tokenizer, seed=0, max_sequences=max_sequences)
    which = "all sequences" if max_sequences is None else f"the first {max_sequences} sequences"
    print(f"held-out, {which}: accuracy {held_out['accuracy']:.4f}, loss {held_out['loss']:.3f}, "
          f"{held_out['tokens']} masked positions")
    hits = 0
    for text, want in PROBES:
        best = top5(model, tokenizer, text)
        hits += want in best
        print(f"  {'yes' if want in best else 'no ':3s} {text} -> {want}: {' '.join(best)}")
    print(f"probes: {hits} of {len(PROBES)}")
    followed = 0
    for (text_a, want_a), (text_b, want_b) in PAIRS:
        ok = (mask_probability(model, tokenizer, text_a, want_a) > mask_probability(model, tokenizer, text_b, want_a)
              and mask_probability(model, tokenizer, text_b, want_b) > mask_probability(model, tokenizer, text_a, want_b))
        followed += ok
        print(f"  {'follows' if ok else 'FAILS  '} {text_a} / {text_b}")
    print(f"pairs: {followed} of {len(PAIRS)}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else None)
