"""How close a distilled student's hidden states are to its teacher's, layer pair by layer pair.

    python benchmarks/distill_cosines.py runs/distil/minilm-l3

Teacher: the real all-MiniLM-L6-v2. For the student before distillation (the teacher's
layers `--layers`, copied) and after (the run's newest checkpoint), the mean cosine
similarity over real tokens between student hidden state m and teacher hidden state g(m)
(TinyBERT's uniform map; m = 0 is the embeddings), on the first `--sequences` held-out
wiki-en sequences of 128 MiniLM pieces (the documents `bertedu distill` holds out).
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run", help="a `bertedu distill --teacher minilm` folder")
    parser.add_argument("--layers", default="0,2,4", help="the teacher layers the student started from")
    parser.add_argument("--sequences", type=int, default=64)
    args = parser.parse_args()

    from bertedu.training.distill import student_from_teacher
    from bertedu.family.distillation import uniform_layer_map
    from bertedu.interop import load_minilm
    from bertedu.data.documents import document_sequences, make_batch, wiki_en_held_out
    from bertedu.training.pretrain import load_pretrained
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    teacher = load_minilm().eval()
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    sequences = document_sequences(wiki_en_held_out(), tokenizer, 128)[: args.sequences]
    ids, mask, _ = make_batch(sequences, tokenizer, torch.Generator().manual_seed(0), mlm_probability=0.0)
    layers = [int(i) for i in args.layers.split(",")]
    mapping = uniform_layer_map(len(layers), teacher.config.num_hidden_layers)
    real = mask.bool()

    def cosines(student) -> list[float]:
        with torch.no_grad():
            s = student(ids, attention_mask=mask, output_hidden_states=True).hidden_states
            t = teacher(ids, attention_mask=mask, output_hidden_states=True).hidden_states
        return [float(F.cosine_similarity(s[m][real], t[g][real], dim=-1).mean()) for m, g in enumerate(mapping)]

    before = cosines(student_from_teacher(teacher, layers).bert.eval())
    after = cosines(load_pretrained(args.run)[0].bert.eval())
    print(f"{len(sequences)} held-out sequences, {int(real.sum()):,} real tokens")
    print("| student hidden state ~ teacher's | " + " | ".join(f"{m} ~ {g}" for m, g in enumerate(mapping)) + " |")
    print("|---|" + "--:|" * len(mapping))
    print("| before distillation | " + " | ".join(f"{c:.3f}" for c in before) + " |")
    print(f"| after ({args.run}) | " + " | ".join(f"{c:.3f}" for c in after) + " |")


if __name__ == "__main__":
    main()
