"""The held-out masked-token measure of minilm-mlm (notes/minilm_mlm.md), and of every
`bertedu pretrain --packing documents` run.

    masked_accuracy(model, tokenizer)    held-out masked-token accuracy and MLM loss

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

import torch

from ..data.documents import document_sequences, make_batch, wiki_en_held_out
from ..errors import SettingError
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
