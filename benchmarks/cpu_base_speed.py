"""BERT-BASE's training speed on this CPU, at a batch a learner would run (notebook 07, issue 57).

One BERT-BASE `BertForPreTraining` (fp32, dropout on, the fast path `bertedu pretrain` uses: unpadded
attention and the sparse MLM head), the library's AdamW (`param_groups`, the paper's settings), real
sentence pairs of wiki-en cut by bert-base-uncased's 30,522-piece vocabulary, masked as in notebook 05.
Each training step is timed in two parts: forward + backward (the model's cost, which grows with the
batch) and clipping + the AdamW update (the optimiser's cost over 110M parameters, the same at any batch).
Warm-up steps first, then timed steps; the record holds every timed step, the median and the spread.

    python benchmarks/cpu_base_speed.py --threads 2 --json bertedu/weights/cpu_base_speed.json

Two shapes by default: 8 x 128 (a learner's batch) and 2 x 32 (the tiny batch notebook 07 once timed,
where the optimiser dominates). The record notes `uptime`'s load averages before and after: on a
shared machine the figures are slower than on an idle one.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from bertedu import BertConfig, BertForPreTraining  # noqa: E402
from bertedu.data import build_pretraining_dataset, collate_pretraining  # noqa: E402
from bertedu.data.corpora import load_corpus  # noqa: E402
from bertedu.data.tokenizer import load_vocab_tokenizer  # noqa: E402
from bertedu.model.fast import set_fast_path  # noqa: E402
from bertedu.pretrained import minilm_vocab_path  # noqa: E402
from bertedu.training.loop import param_groups  # noqa: E402


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def batches(batch_size: int, seq_len: int, count: int, seed: int = 0) -> list[dict]:
    """`count` batches of real wiki-en sentence pairs, each sequence filled to `seq_len` pieces where the text allows."""
    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    documents = list(itertools.islice(load_corpus("wiki-en"), 20))
    pairs = build_pretraining_dataset(documents, tokenizer, max_seq_length=seq_len, short_seq_prob=0.0,
                                      masking="static", seed=seed)
    need = batch_size * count
    assert len(pairs) >= need, f"{len(pairs)} pairs, {need} needed"
    return [collate_pretraining([pairs[i] for i in range(k * batch_size, (k + 1) * batch_size)],
                                pad_token_id=tokenizer.pad_token_id) for k in range(count)]


def time_steps(batch_size: int, seq_len: int, warmup: int, steps: int) -> dict:
    """Per timed step: seconds of forward + backward, and of clipping + AdamW."""
    torch.manual_seed(0)
    model = BertForPreTraining(BertConfig.base()).train()
    set_fast_path(model, unpad=True, sparse_mlm=True)
    optimizer = torch.optim.AdamW(param_groups(model, 0.01), lr=1e-4, betas=(0.9, 0.999), eps=1e-6)
    data = batches(batch_size, seq_len, warmup + steps)
    model_s, optimizer_s, real_tokens = [], [], []
    for i, batch in enumerate(data):
        start = time.perf_counter()
        loss = model(**batch).loss
        loss.backward()
        middle = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        end = time.perf_counter()
        if i >= warmup:
            model_s.append(middle - start)
            optimizer_s.append(end - middle)
            real_tokens.append(int(batch["attention_mask"].sum()))
        print(f"{batch_size}x{seq_len} step {i}: model {middle - start:.2f} s, optimiser {end - middle:.2f} s",
              flush=True)
    step_s = [a + b for a, b in zip(model_s, optimizer_s)]
    tokens_per_s = [n / s for n, s in zip(real_tokens, step_s)]
    quartiles = statistics.quantiles(tokens_per_s, n=4)
    return {"batch_size": batch_size, "seq_len": seq_len, "warmup_steps": warmup, "timed_steps": steps,
            "real_tokens_per_step": real_tokens, "model_seconds": model_s, "optimizer_seconds": optimizer_s,
            "tokens_per_s": tokens_per_s, "median_tokens_per_s": statistics.median(tokens_per_s),
            "quartiles_tokens_per_s": [quartiles[0], quartiles[2]],
            "median_model_seconds": statistics.median(model_s),
            "median_optimizer_seconds": statistics.median(optimizer_s)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--shapes", default="8x128,2x32", help="batch x length, comma-separated")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=7)
    parser.add_argument("--json", default="bertedu/weights/cpu_base_speed.json")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    record = {"command": "python benchmarks/cpu_base_speed.py " + " ".join(sys.argv[1:]),
              "machine": {"processor": platform.processor() or platform.machine(), "cpus": os.cpu_count(),
                          "threads": args.threads, "torch": torch.__version__,
                          "capability": torch.backends.cpu.get_cpu_capability()},
              "load_before": load_average(), "shapes": []}
    start = time.time()
    for shape in args.shapes.split(","):
        b, t = (int(x) for x in shape.split("x"))
        record["shapes"].append(time_steps(b, t, args.warmup, args.steps))
    record["load_after"] = load_average()
    record["wall_seconds"] = round(time.time() - start)
    record["date"] = time.strftime("%Y-%m-%d", time.gmtime())
    Path(args.json).write_text(json.dumps(record, indent=1) + "\n", encoding="utf-8")
    for s in record["shapes"]:
        print(f"{s['batch_size']} x {s['seq_len']}: median {s['median_tokens_per_s']:,.0f} tokens/s "
              f"(quartiles {s['quartiles_tokens_per_s'][0]:,.0f}-{s['quartiles_tokens_per_s'][1]:,.0f}); "
              f"model {s['median_model_seconds']:.2f} s, optimiser {s['median_optimizer_seconds']:.2f} s a step")
    print(f"load {record['load_before']} -> {record['load_after']}; wrote {args.json}")


if __name__ == "__main__":
    main()
