"""`bertedu` on the command line: pretrain, finetune, fill-mask.

The flags of `bertedu pretrain` are built from `PretrainConfig`'s fields, so the command
line and the Python API cannot drift apart.

    bertedu pretrain --preset mini --corpus wiki-en --steps 2000 --out runs/mini-en
    bertedu fill-mask runs/mini-en "the capital of france is [MASK] ."
    bertedu finetune --task sentiment-zh --init runs/mini-zh --out runs/ft-sentiment
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import re
import sys
import typing
from typing import Optional, Sequence

from .config import PRESETS

PRETRAIN_HELP = {
    "preset": f"model size: {', '.join(PRESETS)} (default: mini)",
    "corpus": "wiki-en (embedded English Wikipedia), bible-en[:kjv|web|asv|ylt], peoples-daily-zh "
              "(embedded People's Daily 1998), a file in BERT format (one sentence per line, blank "
              "line between documents), a folder of .txt files, or hf:NAME[:CONFIG] (Hugging Face "
              "datasets; needs a network) (default: wiki-en)",
    "out": "output folder: vocab.txt, checkpoint-<step>/, metrics.jsonl, metrics.png (default: runs/pretrain)",
    "max_seq_length": "tokens per example, [CLS] A [SEP] B [SEP] included; the paper uses 128, then 512 "
                      "for the last 10%% of steps (see --init-from) (default: 128)",
    "steps": "stop after this many optimiser steps",
    "max_tokens": "stop after this many real (non-padding) training tokens",
    "time_budget": "stop after this much wall-clock time: seconds, or with a unit: 90s, 45m, 2h",
    "batch_size": "examples per micro-batch, per process (default: 32)",
    "grad_accum_steps": "micro-batches per optimiser step; the global batch is batch_size x processes "
                        "x grad_accum_steps (default: 1)",
    "lr": "peak learning rate of AdamW (default: 5e-4; BERT-BASE used 1e-4)",
    "warmup_ratio": "fraction of the run spent warming the learning rate up linearly, before its linear "
                    "decay to 0 (default: 0.06)",
    "weight_decay": "AdamW weight decay, never applied to biases and LayerNorm (default: 0.01)",
    "vocab": "vocab.txt to use; 'minilm' for bert-base-uncased's 30,522 pieces; default: train one on "
             "the corpus (WordPiece for English, one token per character for Chinese)",
    "vocab_size": "size of a WordPiece vocabulary trained on the corpus (default: 8000)",
    "masking": "dynamic: a fresh MLM mask every epoch (RoBERTa); static: masks fixed when the data "
               "set is built, dupe_factor copies (original BERT) (default: dynamic)",
    "dupe_factor": "with static masking, copies of each example, each masked differently (default: 1)",
    "whole_word": "mask whole words (all their WordPiece pieces; for Chinese, all characters of a "
                  "word of the corpus's own segmentation)",
    "short_seq_prob": "probability of a shorter target length, so the model also sees short inputs "
                      "(default: 0.1)",
    "max_documents": "read only the first N documents of the corpus",
    "stream": "for corpora larger than memory: write the examples to OUT/examples/ shard by shard "
              "(one shard of documents in memory at a time) and train from them memory-mapped; "
              "held-out documents are chosen by a hash of their position",
    "shard_documents": "with --stream, documents per shard; NotNext segments come from the same shard "
                       "(default: 10000)",
    "eval_documents": "fraction of documents held out to measure MLM and NSP accuracy (default: 0.05)",
    "max_eval_examples": "held-out examples evaluated (default: 512)",
    "init_from": "a previous run's folder to start from (phase 2 at --max-seq-length 512); its vocab.txt is reused",
    "attn_implementation": "attention kernel: sdpa (fused) or reference (written out) (default: sdpa)",
    "unpad": "fast path: only real tokens go through the dense layers, attention stays within each "
             "sequence (same loss and gradients; --no-unpad for the readable path) (default: on)",
    "sparse_mlm": "fast path: the MLM head runs only on the masked positions (same loss and gradients; "
                  "--no-sparse-mlm for the readable path) (default: on)",
    "precision": "auto (bf16 autocast on CUDA, fp32 on CPU), fp32 or bf16 (default: auto)",
    "compile": "torch.compile the model (falls back to eager if compilation fails)",
    "num_workers": "DataLoader worker processes preparing batches (default: 0)",
    "seed": "seed for data order, masks, NSP pairs and initialisation (default: 0)",
    "log_every": "log a metrics record every N steps (default: 10)",
    "eval_every": "evaluate on held-out data every N steps; 0: at the end only (default: 0)",
    "save_every": "write a checkpoint every N steps; 0: at the end only (default: 0)",
    "progress": "show a progress bar (use --no-progress in logs)",
}


def _finetune_help() -> dict:
    """Help for each `bertedu finetune` flag (a function: TASKS is read from bertedu.data)."""
    from .data.task_data import EMBEDDED_TASKS, HF_TASKS

    return {
        "task": f"what to fine-tune on: an embedded task ({', '.join(EMBEDDED_TASKS)}; offline), a canonical one "
                f"({', '.join(HF_TASKS)}; Hugging Face datasets, needs a network the first time), or a PATH to "
                "GLUE .tsv / CoNLL / SQuAD .json files (a folder with train/dev/test files, or one file)",
        "init": "where the encoder comes from: minilm (the real all-MiniLM-L6-v2 weights and vocabulary), "
                "a `bertedu pretrain --out` folder (its latest checkpoint and vocab.txt), or random "
                "(no pretraining: the control) (default: minilm)",
        "out": "output folder: vocab.txt, checkpoint-<step>/, metrics.jsonl, metrics.png, model/ (the best "
               "weights), predictions_dev.jsonl, predictions_test.jsonl, results.json (default: runs/finetune)",
        "preset": f"model size for --init random: {', '.join(PRESETS)} (default: mini, the size `bertedu "
                  "pretrain` trains by default)",
        "vocab": "vocab.txt for --init random (default: MiniLM's 30,522 pieces for English; for Chinese, one "
                 "token per character of the task's training text)",
        "max_seq_length": "tokens per input, specials included; longer inputs are truncated, QA contexts are "
                          "cut into windows (default: 128; 384 for QA)",
        "doc_stride": "QA: context tokens between the starts of two consecutive windows (default: 128)",
        "max_query_length": "QA: question pieces kept (default: 64)",
        "max_answer_length": "QA: longest answer span, in tokens (default: 30)",
        "epochs": "passes over the training set; the paper uses 2-4 (default: 3)",
        "steps": "optimiser steps instead of --epochs",
        "batch_size": "examples (QA: windows) per step; the paper uses 16 or 32 (default: 32)",
        "lr": "peak learning rate of AdamW (default: 5e-5 from a pretrained encoder, the paper's grid being "
              "5e-5/3e-5/2e-5; 1e-4 from random; 1e-3 with --freeze-encoder)",
        "warmup_ratio": "fraction of the steps spent warming the learning rate up, before its linear decay "
                        "to 0 (default: 0.1)",
        "weight_decay": "AdamW weight decay, never on biases and LayerNorm (default: 0.01)",
        "max_train": "use at most N training examples (a seeded subsample, for quick CPU runs)",
        "max_eval": "use at most N examples of each of dev and test (a seeded subsample)",
        "data_seed": "seed of the task's train/dev/test split and of the subsamples; keep it fixed to compare "
                     "runs (default: 0)",
        "eval_every": "score the dev set every N steps (0: once per epoch); the best weights are kept "
                      "(default: 0)",
        "patience": "early stopping: stop after N dev evaluations without improvement (default: never)",
        "freeze_encoder": "feature-based use: train the head only, on a frozen encoder (with mean pooling for "
                          "classification, as sentence-BERT)",
        "pooling": "classification: pooler (BERT's tanh(dense([CLS]))) or mean (of the real tokens) "
                   "(default: mean with --freeze-encoder, else pooler)",
        "precision": "auto (bf16 autocast on CUDA, fp32 on CPU), fp32 or bf16 (default: auto)",
        "seed": "seed for the head's initialisation, dropout and data order (default: 0)",
        "log_every": "log the training loss every N steps (default: 10)",
        "progress": "show a progress bar and a line per dev evaluation (use --no-progress in logs)",
    }


def parse_duration(text: str) -> float:
    """'90' or '90s' -> 90.0; '45m' -> 2700.0; '2h' -> 7200.0."""
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+)\s*([smh]?)\s*", text)
    if not m:
        raise argparse.ArgumentTypeError(f"not a duration: {text!r} (use e.g. 600, 90s, 45m, 2h)")
    return float(m.group(1)) * {"": 1, "s": 1, "m": 60, "h": 3600}[m.group(2)]


def _add_dataclass_flags(parser: argparse.ArgumentParser, cls, help_text: dict) -> None:
    hints = typing.get_type_hints(cls)
    for field in dataclasses.fields(cls):
        flag = "--" + field.name.replace("_", "-")
        kind = hints[field.name]
        args = typing.get_args(kind)
        base = next((a for a in args if a is not type(None)), kind) if args else kind
        if base is bool:
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=field.default,
                                help=help_text[field.name])
        else:
            convert = parse_duration if field.name == "time_budget" else base
            parser.add_argument(flag, type=convert, default=field.default, help=help_text[field.name],
                                choices=list(PRESETS) if field.name == "preset" else None)


def build_parser() -> argparse.ArgumentParser:
    from .pretrain import PretrainConfig

    parser = argparse.ArgumentParser(prog="bertedu", description="Learn BERT by building it: pretrain and probe BERTs.")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser(
        "pretrain", help="pretrain a BERT (MLM + NSP) on a corpus",
        description="Pretrain a BertForPreTraining (masked LM + next sentence prediction). "
                    "A preset alone runs on the embedded English Wikipedia. The paper's two phases: "
                    "run with --max-seq-length 128, then again with --max-seq-length 512 "
                    "--init-from <first run's --out> for the last 10% of steps.",
    )
    _add_dataclass_flags(p, PretrainConfig, PRETRAIN_HELP)
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its latest checkpoint")

    from .data.task_data import TASKS
    from .finetune import FinetuneConfig

    ft = sub.add_parser(
        "finetune", help="fine-tune a BERT on a downstream task: " + ", ".join(TASKS) + ", or a PATH",
        description="Fine-tune an encoder with a task head (classification, tagging or extractive QA) on the "
                    "shared training loop: AdamW, warm-up then linear decay, dev evaluations with early "
                    "stopping, the best weights kept. Prints dev and test metrics; writes predictions. "
                    "Tasks: " + ", ".join(TASKS) + ", or a PATH.",
    )
    _add_dataclass_flags(ft, FinetuneConfig, _finetune_help())

    f = sub.add_parser("fill-mask", help="top predictions for each [MASK] in a text, from a pretraining run")
    f.add_argument("run", help="a `bertedu pretrain --out` folder")
    f.add_argument("text", nargs="+", help="text with one or more [MASK]")
    f.add_argument("--top-k", type=int, default=5, help="predictions shown per [MASK] (default: 5)")
    f.add_argument("--untrained", action="store_true",
                   help="also show the same architecture with random weights (seed 0), for comparison")
    return parser


def _config_from_args(cls, args: argparse.Namespace):
    """The config dataclass from the parsed flags; None (after printing why) if it is invalid."""
    names = {f.name for f in dataclasses.fields(cls)}
    try:
        return cls(**{k: v for k, v in vars(args).items() if k in names})
    except ValueError as err:
        print(f"bertedu {args.command}: {err}", file=sys.stderr)
        return None


def main(argv: Optional[Sequence[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "pretrain":
        from .pretrain import PretrainConfig, pretrain

        cfg = _config_from_args(PretrainConfig, args)
        if cfg is None:
            return 2
        result = pretrain(cfg, resume=args.resume)
        summary = {"step": result.step, "loss": result.loss, "tokens": result.tokens_seen,
                   "elapsed_s": round(result.elapsed_s, 1), "stopped_by": result.stopped_by,
                   "checkpoint": result.checkpoint, "eval": result.eval}
        print(json.dumps(summary, indent=2))
        return 0
    if args.command == "finetune":
        from .finetune import FinetuneConfig, finetune, results_table

        cfg = _config_from_args(FinetuneConfig, args)
        if cfg is None:
            return 2
        results = finetune(cfg)
        print(f"{results['task']} from {results['init']}: best dev at step {results['best_step']} of "
              f"{results['steps']}{' (stopped early)' if results['stopped_early'] else ''}; results in {cfg.out}")
        print(results_table(results))
        return 0
    if args.command == "fill-mask":
        from .pretrain import fill_mask, load_pretrained

        model, tokenizer = load_pretrained(args.run)
        models = [("trained", model)]
        if args.untrained:
            import torch

            from .heads import BertForPreTraining

            torch.manual_seed(0)
            models.append(("untrained", BertForPreTraining(model.config).eval()))
        for text in args.text:
            print(text)
            for name, m in models:
                for i, preds in enumerate(fill_mask(m, tokenizer, text, args.top_k)):
                    shown = "  ".join(f"{tok} {p:.3f}" for tok, p in preds)
                    label = f"{name} " if len(models) > 1 else ""
                    print(f"  {label}[MASK] {i + 1}: {shown}")
        return 0
    return 2


if __name__ == "__main__":
    raise SystemExit(main())
