"""BERT's relatives, built from `bertedu.model`'s pieces: what changes and what stays.

    roberta.py       RoBERTa: no NSP, dynamic masking, byte-level BPE, padding-offset positions   notebook 15
    albert.py        ALBERT: factorised embeddings, one shared layer, sentence-order prediction  notebook 16
    gpt.py           a GPT of the same size, for contrast: causal mask, next-token loss          notebook 17
    elmo.py          ELMo-style: two separate LSTM LMs, one per direction, joined shallowly      notebook 17's appendix
    distilbert.py    DistilBERT: half the layers, no token types, no pooler                      notebook 18
    distillation.py  the distillation losses (soft targets, hidden-state cosine, TinyBERT's)     notebook 18

May import: `bertedu.model`, `bertedu.errors`, `bertedu.utils`.
"""
