"""CPU inference time of a distilled student against its teacher (and transformers' teacher).

    python benchmarks/distill_speed.py --threads 1 2 --json distill_speed.json

Teacher: the real all-MiniLM-L6-v2 (`bertedu.interop.load_minilm`); student: the teacher's
layers 0, 2 and 4 (`bertedu.training.distill.student_from_teacher`; the time does not depend on the
weights, so no distillation run is needed). Each model encodes the same batches of real
text: held-out wiki-en sequences of 128 MiniLM word pieces, as batches of 32 (throughput)
and of 1 (latency), in eval mode under `torch.no_grad()`, fp32, the library's default
attention (sdpa). Time: the median of `--repeats` timed passes after 2 warm-up passes,
models interleaved pass by pass so that a change in the machine's load reaches all alike.
transformers' `BertModel` with the teacher's weights is timed beside them as the reference.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time

import torch


def batches(tokenizer, length: int, sizes: list[int]) -> dict[int, dict]:
    from bertedu.data.documents import document_sequences, wiki_en_held_out

    sequences = [s for s in document_sequences(wiki_en_held_out(), tokenizer, length) if len(s) == length]
    out = {}
    for size in sizes:
        ids = torch.tensor(sequences[:size])  # (B, T), every token real
        out[size] = {"input_ids": ids, "attention_mask": torch.ones_like(ids)}
    return out


def models(layers: list[int]) -> dict[str, torch.nn.Module]:
    from transformers import BertModel as HFBertModel

    from bertedu.training.distill import student_from_teacher
    from bertedu.interop import load_minilm, to_hf

    teacher = load_minilm().eval()
    student = student_from_teacher(teacher, layers).bert.eval()
    hf = to_hf(teacher)
    hf = (hf if isinstance(hf, HFBertModel) else hf.bert).eval()
    return {"teacher": teacher, "student": student, "transformers teacher": hf}


@torch.no_grad()
def time_models(named: dict, batch: dict, repeats: int) -> dict[str, float]:
    """Median seconds per forward pass of each model, passes interleaved."""
    times = {name: [] for name in named}
    for i in range(repeats + 2):
        for name, model in named.items():
            start = time.perf_counter()
            model(**batch)
            if i >= 2:  # two warm-up passes
                times[name].append(time.perf_counter() - start)
    return {name: statistics.median(t) for name, t in times.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--layers", default="0,2,4", help="the student's teacher layers")
    parser.add_argument("--length", type=int, default=128)
    parser.add_argument("--batch-sizes", type=int, nargs="+", default=[32, 1])
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--json", help="write the measurements here")
    args = parser.parse_args()

    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    named = models([int(i) for i in args.layers.split(",")])
    data = batches(load_vocab_tokenizer(minilm_vocab_path(), impl="fast"), args.length, args.batch_sizes)
    rows = []
    for threads in args.threads:
        torch.set_num_threads(threads)
        for size, batch in data.items():
            t = time_models(named, batch, args.repeats)
            rows.append({"threads": threads, "batch": size, "length": args.length,
                         **{f"{name} s": round(v, 5) for name, v in t.items()},
                         "student / teacher": round(t["student"] / t["teacher"], 3),
                         "teacher / transformers": round(t["teacher"] / t["transformers teacher"], 3)})
    params = {name: sum(p.numel() for p in m.parameters()) for name, m in named.items()}
    print(f"parameters: teacher {params['teacher']:,}, student {params['student']:,} "
          f"({params['student'] / params['teacher']:.1%}); torch {torch.__version__}")
    print("| threads | batch × length | teacher | student | student / teacher | transformers teacher |")
    print("|--:|---|--:|--:|--:|--:|")
    for r in rows:
        print(f"| {r['threads']} | {r['batch']} × {r['length']} | {r['teacher s'] * 1000:.1f} ms | "
              f"{r['student s'] * 1000:.1f} ms | **{r['student / teacher']:.2f}** | "
              f"{r['transformers teacher s'] * 1000:.1f} ms |")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"parameters": params, "rows": rows, "torch": torch.__version__}, f, indent=2)


if __name__ == "__main__":
    main()
