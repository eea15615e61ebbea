"""What the fine-tuning studies share (finetune_gap.py, finetune_forgetting.py, finetune_advice.py, crf_gap.py):
the arguments every study takes, one `bertedu finetune` run (printed, run in this process unless
its results.json exists, read back), a per-seed summary, the forgetting measure, and the machine.

Not a study itself; the scripts beside it import it (`python benchmarks/<study>.py` puts
this folder on sys.path).
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import io
import json
import platform
import statistics
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent

# the task's CPU-sized recipe, less the learning rate: benchmarks/finetune_gap.py's (ner-zh on a quarter of its
# 4,000 sentences, 125 steps, so that its 33 runs fit a shared 2-core machine in well under an hour)
RECIPES = {
    "topic-en": "--max-train 600 --max-eval 300 --epochs 3 --batch-size 32 --max-seq-length 32",
    "paraphrase-en": "--max-train 192 --max-eval 128 --epochs 1 --batch-size 16 --max-seq-length 64",
    "ner-zh": "--max-train 1000 --max-eval 300 --epochs 1 --batch-size 8 --max-seq-length 64",
}
# the shipped masked LM each task fine-tunes by default: one that reads its language, with its MLM head
INITS = {"topic-en": "minilm-mlm", "paraphrase-en": "minilm-mlm", "ner-zh": "course-zh"}


def study_parser(description: str, threads: int = 2) -> argparse.ArgumentParser:
    """The arguments every study takes: --seeds, --threads, --extra, --out, --json."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--threads", type=int, default=threads)
    parser.add_argument("--extra", default="", help="flags added to every command (later flags win), e.g. for a smoke test")
    parser.add_argument("--out", required=True)
    parser.add_argument("--json", help="also write the numbers, the commands and the machine here")
    return parser


def set_threads(threads: int) -> None:
    """Torch's threads in this process, which runs the fine-tuning too (`run_finetune`)."""
    sys.path.insert(0, str(REPO))
    import torch

    torch.set_num_threads(threads)


def finetune_command(task: str, init: str, flags: list[str], extra: str) -> list[str]:
    """`bertedu finetune --task TASK --init INIT FLAGS EXTRA` (later flags win), less --seed and --out:
    what a record shows, with " --seed SEED" after it."""
    return ["bertedu", "finetune", "--task", task, "--init", init, *flags, *extra.split()]


def run_finetune(task: str, init: str, flags: list[str], seed: str, out: Path, extra: str) -> dict:
    """results.json of `bertedu finetune --task TASK --init INIT FLAGS EXTRA --seed SEED --out OUT`,
    running it (printed first) unless it is there already.

    It runs in this process (`bertedu.cli.main`, its output kept back), on the threads of
    `set_threads`: the same run a `bertedu finetune` process gives (it seeds itself), without
    paying again for the imports and the task's data (an embedded task is built once a process:
    ner-zh takes seconds) at every run of a study."""
    command = [*finetune_command(task, init, flags, extra), "--seed", seed, "--no-progress", "--out", str(out)]
    if not (out / "results.json").exists():
        print(" ".join(command), flush=True)
        from bertedu.cli import main

        output = io.StringIO()
        with contextlib.redirect_stdout(output), contextlib.redirect_stderr(output):
            status = main(command[1:])
        if status:
            raise SystemExit(f"{' '.join(command)} failed:\n{output.getvalue()[-2000:]}")
    return json.loads((out / "results.json").read_text())


def task_score(results: dict) -> float:
    return results["test"][results["main_metric"]]


def mean_sd(values: list[float]) -> str:
    """'mean ± sample sd (each value)', three decimals: how the docs tables show seeds."""
    sd = statistics.stdev(values) if len(values) > 1 else 0
    return f"{statistics.mean(values):.3f} ± {sd:.3f} ({', '.join(f'{x:.3f}' for x in values)})"


def cpu_name() -> str:
    """The CPU's model name (/proc/cpuinfo on Linux): CPUs of different makes round float32 products differently."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    return platform.processor() or "unknown CPU"


def machine() -> str:
    import torch

    return (f"{cpu_name()}, {platform.machine()}, torch {torch.__version__}, "
            f"CPU capability {torch.backends.cpu.get_cpu_capability()}")


def shown_command(script: str) -> str:
    """This process's own command line, as the docs show it."""
    return " ".join(sys.argv).replace(sys.argv[0], f"python benchmarks/{script}")


@functools.cache
def _masked_lm(init: str):
    """The shipped masked LM `init`, its tokenizer, its encoder's weights and its held-out text
    (None: wiki-en's held-out documents, minilm-mlm's measure): loaded once, reused for every run."""
    from bertedu.pretrained import load_masked_lm

    model, tokenizer = load_masked_lm(init)
    documents = None
    if init != "minilm-mlm":  # a course model: the documents its own pretraining run held out
        from course_lengths import held_out_documents

        documents = held_out_documents(init, 10**6)
    return model, tokenizer, {k: v.clone() for k, v in model.bert.state_dict().items()}, documents


def masked_accuracy_of(init: str, run: Path | None, sequences: int) -> float:
    """Held-out masked-token accuracy of `init`'s own MLM head on top of `run`'s fine-tuned
    encoder (None: `init` as shipped): the first `sequences` 128-piece runs, masks of seed 0."""
    from bertedu.training.finetune import load_finetuned
    from bertedu.training.heldout import masked_accuracy

    model, tokenizer, shipped, documents = _masked_lm(init)
    model.bert.load_state_dict(shipped)
    if run is not None:
        tuned = load_finetuned(run)[0].bert.state_dict()
        encoder = {k: v for k, v in tuned.items() if not k.startswith("pooler.")}
        missing, unexpected = model.bert.load_state_dict(encoder, strict=False)
        assert not unexpected and all(k.startswith("pooler.") for k in missing), (missing, unexpected)
    return masked_accuracy(model, tokenizer, documents, seed=0, max_sequences=sequences)["accuracy"]
