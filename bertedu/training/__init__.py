"""The one training loop, what serves it, and the three jobs that run on it.

The loop and its services:

    loop.py         train(): AdamW, warm-up and decay, accumulation, clipping, bf16, DDP, resume
    config.py       TrainConfig, TrainState, TrainResult (shared by the loop and its helpers)
    batches.py      the order the loop sees the data in, as a pure function of (seed, step)
    progress.py     the progress bar
    checkpoint.py   safetensors checkpoints written atomically, with RNG state; sha256 manifests
    jobs.py         the run lock and stop signals (one run per output folder)
    runfolder.py    identity.json: a run folder's kind, settings and data, checked by --resume / --overwrite
    distributed.py  torchrun / DDP set-up
    curves.py       metrics.jsonl and the learning-curve PNG beside every run
    metrics.py      task metrics: accuracy, F1, entity F1, SQuAD EM/F1
    heldout.py      held-out masked-token accuracy on wiki-en's held-out documents (minilm-mlm's measure)
    probe.py        a logistic-regression head fitted to convergence on frozen features (notebook 10)

The jobs (each a `bertedu` subcommand):

    pretrain.py     `bertedu pretrain`: MLM (+ NSP / SOP), from scratch or from a shipped model; the
                    minilm-mlm recipe (MiniLM given an MLM head) is a set of its options
    finetune.py     `bertedu finetune`, with taskio.py (each task family's inputs and scores)
    distill.py      `bertedu distill`: a smaller student from a teacher
    ship.py         a finished pretraining run shipped as a course model folder, bertedu/weights/NAME
                    (whole, or minilm-mlm's way): `python -m bertedu.training.ship`

Using a finished run (the `bertedu` subcommands of the same names):

    inference.py    `bertedu predict` (new text -> JSON lines with probabilities), `bertedu evaluate`
    to_transformers.py  `bertedu export`: any run or shipped model as a folder transformers' Auto classes load
    masked_lms.py   which masked LM a name or folder means, and whether its MLM head was trained

May import: `bertedu.model`, `bertedu.family`, `bertedu.data`, `bertedu.pretrained`,
`bertedu.interop`, `bertedu.errors`, `bertedu.utils`. Never `bertedu.course` or the CLI.
"""
