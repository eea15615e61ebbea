"""The held-out masked-token measure of minilm-mlm (notes/minilm_mlm.md), and of every
`bertedu pretrain --packing documents` run.

    masked_accuracy(model, tokenizer)    held-out masked-token accuracy and MLM loss
    check_past_plateau(model, tokenizer) raises unless the loss at [MASK] is below the frequencies'

`bertedu masked-accuracy minilm-mlm` (or a run folder) prints it for a shipped model; a
`--packing documents` run logs it as eval_mlm_accuracy / eval_mlm_loss at every evaluation,
on its --corpus's held-out documents (wiki-en's below, for the default corpus).
Notebook 06's last section introduces the model it was made for (minilm-mlm).
The documents are wiki-en's held-out ones (`bertedu.data.documents.wiki_en_held_out`: 5% of
the articles, split by a fixed seed, so every run is measured on the same text), cut into
`[CLS] pieces [SEP]` runs of 128 pieces; 15% of the pieces are selected (80% [MASK], 10%
random, 10% kept), the masks drawn from one generator seeded with `seed`, batch after batch.
"""

from __future__ import annotations

import math

import torch

from ..data.documents import document_sequences, held_out_split, make_batch, unigram_log_probs, wiki_en_held_out
from ..errors import SettingError, UserError
from ..model.constants import IGNORE_INDEX

EVAL_SEQ_LENGTH = 128  # the measure's sequence length, whatever length a run trains at


@torch.no_grad()
def masked_accuracy(model, tokenizer, documents=None, seed: int = 0, max_seq_length: int = EVAL_SEQ_LENGTH,
                    max_sequences: int | None = None, batch_size: int = 32, by_position: bool = False) -> dict:
    """Held-out masked-token accuracy (and MLM loss) of `model` (a `BertForPreTraining`) on `documents`.

    documents: lists of sentences; None means wiki-en's held-out documents. They are cut
    into `[CLS] ... [SEP]` runs of `max_seq_length` pieces, the first `max_sequences` kept;
    15% of the pieces are selected (80% [MASK], 10% random, 10% kept) with masks drawn from
    `seed`, and every selected position counts (as in BERT's own evaluation). Runs in fp32
    whatever precision the model trains in. Returns {"accuracy", "loss", "tokens"}: loss is
    the mean cross-entropy over the selected positions, tokens their number. by_position adds
    "correct_by_position" and "tokens_by_position": per position 0..max_seq_length-1, the
    selected tokens predicted right and the selected tokens (lists of ints).
    """
    if max_sequences is not None and max_sequences < 1:
        raise SettingError(f"max_sequences must be at least 1 (or None: all), got {max_sequences}")
    if documents is None:
        documents = wiki_en_held_out()
    sequences = document_sequences(documents, tokenizer, max_seq_length)[:max_sequences]
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    correct = total = 0
    loss_sum = 0.0
    hits = torch.zeros(max_seq_length, dtype=torch.long)  # (T,): right answers by position
    seen = torch.zeros(max_seq_length, dtype=torch.long)  # (T,): selected tokens by position
    for start in range(0, len(sequences), batch_size):
        batch = make_batch(sequences[start:start + batch_size], tokenizer, generator)  # masks drawn on the CPU
        ids, attention_mask, labels = (t.to(device) for t in batch)  # (B, T) each
        hidden = model.bert(ids, attention_mask=attention_mask).last_hidden_state  # (B, T, D)
        selected = labels != IGNORE_INDEX  # (B, T)
        picked = model.mlm(hidden[selected]).float()  # (M, V): the head only where it is scored
        right = picked.argmax(-1) == labels[selected]  # (M,)
        position = selected.nonzero()[:, 1].cpu()  # (M,)
        hits += torch.bincount(position, weights=right.cpu().double(), minlength=max_seq_length).long()
        seen += torch.bincount(position, minlength=max_seq_length)
        correct += right.sum().item()
        loss_sum += torch.nn.functional.cross_entropy(picked, labels[selected], reduction="sum").item()
        total += int(selected.sum())
    model.train(was_training)
    measured = {"accuracy": correct / max(total, 1), "loss": loss_sum / max(total, 1), "tokens": total}
    if by_position:
        measured.update(correct_by_position=hits.tolist(), tokens_by_position=seen.tolist())
    return measured


def as_eval_record(measured: dict) -> dict:
    """`masked_accuracy`'s numbers under the names the loop's own evaluation logs (loss,
    mlm_loss, mlm_accuracy), so metrics.jsonl, metrics.png and the summary read alike."""
    return {"loss": measured["loss"], "mlm_loss": measured["loss"], "mlm_accuracy": measured["accuracy"],
            "mlm_tokens": measured["tokens"]}


class StillOnPlateauError(UserError, RuntimeError):
    """A pretrained model whose held-out loss at [MASK] is not measurably below the loss of
    answering with the word-piece frequencies: it has not yet learnt to read the context."""


@torch.no_grad()
def mask_losses_against_unigram(model, tokenizer, documents=None, train_documents=None, seed: int = 0,
                                max_seq_length: int = EVAL_SEQ_LENGTH, max_sequences: int | None = None,
                                batch_size: int = 32) -> dict:
    """At each held-out position the input shows as [MASK] (only the context tells the word there):
    the model's loss, and the loss of a model that ignores the context and answers with the piece
    frequencies of `train_documents` (add-one counts), the unigram plateau every masked LM first
    sits on (notebook 06). documents / train_documents: lists of sentences; None means wiki-en's
    held-out articles / its other articles. Masks as in `masked_accuracy` (15%, from `seed`).
    Returns (M,) tensors: "model", "unigram" (losses, nats) and "sequence" (the held-out sequence
    each position sits in, for standard errors clustered by sequence)."""
    if documents is None or train_documents is None:
        from ..data.corpora import wiki_en

        train_split, held_split = held_out_split(list(wiki_en()))
        documents = held_split if documents is None else documents
        train_documents = train_split if train_documents is None else train_documents
    unigram = unigram_log_probs(document_sequences(train_documents, tokenizer, max_seq_length), len(tokenizer),
                                tokenizer.special_ids)  # (V,)
    sequences = document_sequences(documents, tokenizer, max_seq_length)[:max_sequences]
    generator = torch.Generator().manual_seed(seed)
    was_training = model.training
    model.eval()
    device = next(model.parameters()).device
    parts: dict[str, list] = {"model": [], "unigram": [], "sequence": []}
    for start in range(0, len(sequences), batch_size):
        ids, attention_mask, labels = make_batch(sequences[start:start + batch_size], tokenizer, generator)
        at_mask = (labels != IGNORE_INDEX) & (ids == tokenizer.mask_token_id)  # (B, T)
        hidden = model.bert(ids.to(device), attention_mask=attention_mask.to(device)).last_hidden_state  # (B, T, D)
        logits = model.mlm(hidden[at_mask.to(device)]).float()  # (M, V)
        words = labels[at_mask]  # (M,)
        parts["model"].append(torch.nn.functional.cross_entropy(logits, words.to(device), reduction="none").cpu())
        parts["unigram"].append(-unigram[words])
        parts["sequence"].append(start + at_mask.nonzero()[:, 0])
    model.train(was_training)
    return {k: torch.cat(v) for k, v in parts.items()}


def check_past_plateau(model, tokenizer, name: str = "the model", **kwargs) -> dict:
    """Raise `StillOnPlateauError` unless `model`'s held-out loss at [MASK] is below the unigram
    loss at the same positions (`mask_losses_against_unigram`, which takes **kwargs) by at least
    t(0.975, G - 1) standard errors of the paired difference, clustered by the G sequences: the
    rule of `bertedu.course.stats.compare_examples(..., clusters=...)`, with t from the
    Cornish-Fisher expansion (within 0.001 of Student's for G >= 30; scipy is not needed). Notebook 07 runs it on its
    gpu-scale run before notebooks 08-11 fine-tune that run. Returns the numbers it judged and
    the per-position "losses"."""
    losses = mask_losses_against_unigram(model, tokenizer, **kwargs)
    diff = losses["model"] - losses["unigram"]  # (M,) below 0 where the context helped
    groups = int(losses["sequence"].unique().numel())
    if groups < 30:
        raise SettingError(f"{groups} held-out sequences hold a [MASK]: too few to judge {name}; give more text")
    sums = torch.zeros(int(losses["sequence"].max()) + 1).index_add_(0, losses["sequence"], diff - diff.mean())
    se = math.sqrt(groups / (groups - 1) * float((sums ** 2).sum())) / len(diff)
    z, df = 1.959964, groups - 1  # t(0.975, df) by Cornish-Fisher, two terms past the normal's z
    critical = z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
    numbers = {"loss_mask": losses["model"].mean().item(), "unigram_loss": losses["unigram"].mean().item(),
               "difference": diff.mean().item(), "se": se, "positions": len(diff), "sequences": groups, "critical": critical, "losses": losses}
    if numbers["difference"] > -critical * se:
        raise StillOnPlateauError(
            f"{name}: held-out loss at [MASK] {numbers['loss_mask']:.3f} is not below {numbers['unigram_loss']:.3f}, "
            f"the loss of answering with the word-piece frequencies (difference {numbers['difference']:+.3f} ± "
            f"{se:.3f} over {len(diff):,} positions in {groups} sequences; it must be below by {critical:.2f} standard "
            "errors). The model has not got past the unigram plateau: it answers with a frequency table, not from the "
            "context, so fine-tuning it would start from little more than random weights. Train it "
            "longer (docs/gpu_route.md), or fine-tune MiniLM instead (leave BERTEDU_PRETRAINED unset)")
    return numbers
