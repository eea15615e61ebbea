"""The GPU route rehearsed in 10 minutes on one GPU, with nothing downloaded (issue 52 item 6).

docs/gpu_route.md's route at a small budget: pretrain BERT-BASE with the budget recipe
(phase 1 at 128 tokens, phase 2 at 512 from it) on the embedded text (wiki-en and four Bible
translations), measure the held-out masked-token accuracy, then fine-tune the phase-2 run on
the four embedded tasks that stand in for SST-2, MRPC, CoNLL-2003 and SQuAD (topic-en,
paraphrase-en, ner-en, qa-cloze-en). Every stage is a `bertedu` command (printed before it
runs); the table comes last.

    python benchmarks/gpu_route.py --out runs/gpu-route             # one GPU, about 10 minutes
    python benchmarks/gpu_route.py --smoke --out /tmp/route-smoke  # CPU: tiny, a few steps

The table: tokens/s and MFU of phase 1 (the median logged speed after the first fifth of
the records, over the published dense bf16 peak of the GPU, bertedu.utils.peak_bf16_flops),
the data path (the loop's logs do not time the loader: here one process times the
documents collate on phase 1's own sequences, and "data/step" is that time per batch
divided by the workers, over the step time: above 1 the GPU waits for data), held-out
masked-token accuracy (`bertedu masked-accuracy`), and each fine-tune's dev score.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from bertedu.training.pretrain import BUDGET_RECIPE  # noqa: E402

EXTRA_CORPUS = ["--extra-corpus", "bible-en:web,bible-en:kjv,bible-en:asv,bible-en:ylt"]
TASKS = {"topic-en": "SST-2", "paraphrase-en": "MRPC", "ner-en": "CoNLL-2003", "qa-cloze-en": "SQuAD v1.1"}
SCALES = {  # stage -> flags; the budgets add up to about 10 minutes on one GPU (compilation included)
    "gpu": {"phase1": ["--batch-size", "256", "--lr", "5e-4", "--time-budget", "4m",
                       "--precision", "bf16", "--compile", "--num-workers", "4", "--log-every", "20"],
            "phase2": ["--batch-size", "64", "--lr", "2e-4", "--time-budget", "1m", "--precision", "bf16",
                       "--compile", "--num-workers", "4", "--log-every", "20"],
            "finetune": ["--epochs", "2", "--batch-size", "32", "--lr", "5e-5", "--time-budget", "30s",
                         "--precision", "bf16"],
            "device": [], "preset": ["--preset", "base"], "corpus": ["--corpus", "wiki-en", *EXTRA_CORPUS]},
    "smoke": {"phase1": ["--batch-size", "4", "--lr", "1e-3", "--steps", "3",
                         "--max-documents", "6", "--log-every", "1"],
              "phase2": ["--batch-size", "2", "--lr", "1e-3", "--steps", "2", "--max-documents", "6",
                         "--log-every", "1"],
              "finetune": ["--epochs", "1", "--batch-size", "8", "--max-train", "16", "--max-eval", "8",
                           "--max-seq-length", "128", "--doc-stride", "64"],
              "device": ["--device", "cpu"], "preset": ["--preset", "tiny"], "corpus": ["--corpus", "wiki-en"]},
}


def bertedu(args: list[str]) -> str:
    print("$ bertedu " + " ".join(args), flush=True)
    done = subprocess.run([sys.executable, "-m", "bertedu.cli", *args], capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"failed (status {done.returncode}):\n{done.stderr[-3000:]}")
    return done.stdout


def pretrain_commands(scale: dict, out: Path) -> list[list[str]]:
    """The two phases as `bertedu pretrain` arguments: the budget recipe, minilm's 30,522-piece vocabulary
    padded to 30,528 rows (a multiple of 64, the GPU's fast shape; both phases, as docs/gpu_route.md's RECIPE)."""
    recipe = [*scale["preset"], *scale["corpus"], *BUDGET_RECIPE["flags"], "--warmup-ratio", "0.06", "--no-progress",
              "--pad-vocab-to-multiple-of", "64", *scale["device"]]
    phase1 = ["pretrain", *recipe, "--vocab", "minilm", "--max-seq-length", "128", *scale["phase1"],
              "--out", str(out / "phase1")]
    carried = [f for f in recipe if f != "--unigram-bias"]  # phase 2 keeps phase 1's trained decoder bias
    phase2 = ["pretrain", *carried, "--init-from", str(out / "phase1"), "--max-seq-length", "512",
              *scale["phase2"], "--out", str(out / "phase2")]
    return [phase1, phase2]


def logged_speed(run: Path) -> dict:
    """The median tokens/s over phase 1's training records after the first fifth (compilation, warm-up)."""
    records = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    train = [r for r in records if "tokens_per_s" in r]
    kept = train[len(train) // 5:] or train
    last = train[-1]
    return {"tokens_per_s": statistics.median(r["tokens_per_s"] for r in kept), "steps": last["step"],
            "tokens": last["tokens"], "elapsed_s": last["elapsed"]}


def data_path_seconds(run: Path, batch_size: int, batches: int = 5) -> float:
    """Seconds one process spends building one training batch of phase 1 (documents collate:
    pad and mask), the median of `batches` batches; the same code path the DataLoader workers run."""
    import torch

    from bertedu.data.corpora import load_corpus
    from bertedu.data.tokenizer import load_vocab_tokenizer
    from bertedu.training.pretrain import PretrainConfig, document_data, documents_collate

    settings = json.loads((run / "run.json").read_text())
    cfg = PretrainConfig(**settings)
    tokenizer = load_vocab_tokenizer(run / "vocab.txt", impl="fast")
    sequences, _ = document_data(cfg, load_corpus(cfg.corpus), tokenizer)
    collate, generator, times = documents_collate(cfg, tokenizer), torch.Generator().manual_seed(0), []
    for i in range(batches):
        chunk = [sequences[(i * batch_size + j) % len(sequences)] for j in range(batch_size)]
        start = time.process_time()
        collate(chunk, generator)
        times.append(time.process_time() - start)
    return statistics.median(times)


def finetune_scores(scale: dict, out: Path) -> dict:
    """Fine-tune phase 2's run on each embedded task; task -> (metric name, dev score)."""
    scores = {}
    for task in TASKS:
        folder = out / f"finetune-{task}"
        if not (folder / "results.json").exists():
            bertedu(["finetune", "--task", task, "--init", str(out / "phase2"), *scale["finetune"], *scale["device"],
                     "--no-progress", "--out", str(folder)])
        results = json.loads((folder / "results.json").read_text())
        dev = results["dev"]
        name = "accuracy" if results["kind"] == "classification" else "f1"
        scores[task] = (name, dev[name] if name in dev else next(iter(dev.values())))
    return scores


def model_flops_utilisation(tokens_per_s: float, smoke: bool) -> float | None:
    """tokens/s x training FLOPs per token of BERT-BASE at 128 (30% masked) / the GPU's dense bf16 peak."""
    import torch

    from bertedu.model.config import BertConfig
    from bertedu.utils import peak_bf16_flops
    from recipe_compare import train_flops_per_token

    if smoke or not torch.cuda.is_available():
        return None
    peak = peak_bf16_flops(torch.cuda.get_device_name())
    per_token = train_flops_per_token(BertConfig.base(), 128, BUDGET_RECIPE["mlm_probability"])
    return None if peak is None else tokens_per_s * per_token / peak


def flag(flags: list[str], name: str, default=None):
    """The value after `name` in a list of command-line flags, or default."""
    return flags[flags.index(name) + 1] if name in flags else default


def table(row: dict) -> str:
    """The rehearsal's numbers, one per line, the fine-tunes last."""
    mfu = "n/a (CPU smoke)" if row["mfu"] is None else f"{row['mfu']:.1%}"
    lines = [("phase 1 steps / real tokens", f"{row['steps']:,} / {row['tokens']:,}"),
             ("phase 1 tokens per second", f"{row['tokens_per_s']:,.0f}"),
             ("MFU (dense bf16 peak)", mfu),
             ("data path, ms per batch (1 process)", f"{row['data_ms']:.1f}"),
             (f"data / step ({row['workers']} workers; >1: GPU waits)", f"{row['data_share']:.2f}"),
             ("held-out masked-token accuracy", f"{row['heldout_accuracy']:.3f}")]
    for task, (metric, score) in row["finetune"].items():
        lines.append((f"{task} ({TASKS[task]} stand-in) dev {metric}", f"{score:.3f}"))
    width = max(len(name) for name, _ in lines)
    return "\n".join(f"{name.ljust(width)}  {value}" for name, value in lines)


def main(argv=None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU smoke mode: tiny, a few steps")
    parser.add_argument("--out", default="runs/gpu-route")
    args = parser.parse_args(argv)
    scale, out = SCALES["smoke" if args.smoke else "gpu"], Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for command in pretrain_commands(scale, out):
        if not (Path(command[-1]) / "metrics.jsonl").exists():  # a rerun keeps the phases already run
            bertedu(command)
    speed = logged_speed(out / "phase1")
    heldout = json.loads(bertedu(["masked-accuracy", str(out / "phase2"), "--max-sequences", "64" if args.smoke
                                  else "512"]))
    batch, workers = int(flag(scale["phase1"], "--batch-size")), max(1, int(flag(scale["phase1"], "--num-workers", 1)))
    data_s = data_path_seconds(out / "phase1", batch)
    step_s = batch * 128 / speed["tokens_per_s"]  # full 128-token blocks
    row = {**speed, "mfu": model_flops_utilisation(speed["tokens_per_s"], args.smoke), "data_ms": 1000 * data_s,
           "workers": workers, "data_share": data_s / workers / step_s, "heldout_accuracy": heldout["accuracy"],
           "finetune": finetune_scores(scale, out)}
    (out / "route.json").write_text(json.dumps(row, indent=1) + "\n")
    print(table(row))
    return row


if __name__ == "__main__":
    main()
