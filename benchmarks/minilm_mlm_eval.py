"""Measure a `python -m bertedu.training.mlm_adapt train` run folder the way the shipped minilm-mlm
is measured: weights through fp16 and back (as shipped), all 298 held-out sequences, and
the 26 probes and 8 one-word-changed pairs of tests/test_pretrained.py.

    python benchmarks/minilm_mlm_eval.py runs/minilm-mlm-r7-nobible
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from safetensors.torch import load_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from test_pretrained import PAIRS, PROBES, mask_probability, top5  # noqa: E402

from bertedu.training.mlm_adapt import masked_accuracy, minilm_with_head  # noqa: E402
from bertedu.pretrained import minilm_vocab_path  # noqa: E402
from bertedu.data.tokenizer import load_vocab_tokenizer  # noqa: E402


def main(run: str) -> None:
    torch.set_num_threads(2)
    model = minilm_with_head(seed=0)
    state = {k: v.half().float() for k, v in load_file(f"{run}/trainable.safetensors").items()}
    model.load_state_dict(state, strict=False)  # the word embeddings stay MiniLM's own
    model.eval()
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")

    held_out = masked_accuracy(model, tokenizer, seed=0)
    print(f"held-out, all sequences: accuracy {held_out['accuracy']:.4f}, loss {held_out['loss']:.3f}, "
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
    main(sys.argv[1])
