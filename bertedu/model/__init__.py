"""The model the notebooks build: BERT itself, and nothing else.

    config.py       BertConfig (frozen dataclass, presets tiny ... large, from_hf)      notebook 04
    activations.py  GELU and friends, by name                                           notebook 04
    attention.py    scaled dot-product attention written out, multi-head self-attention notebook 03, 04
    embeddings.py   token + position + segment embeddings                               notebook 02
    encoder.py      the post-LayerNorm layer, the encoder, BertModel with its pooler    notebook 04
    heads.py        MLM and NSP heads, BertForPreTraining                               notebook 06
    tasks.py        classification, tagging and question-answering heads                notebooks 08-11
    crf.py          the linear-chain CRF of BERT+CRF tagging (forward algorithm, Viterbi) notebook 09
    outputs.py      the small dataclasses every forward returns
    constants.py    values more than one layer needs (IGNORE_INDEX, file names, kernel names)
    fast.py         the fast path over the same parameters (unpadding, sparse MLM head)  notebook 12

May import: only modules of this folder, and `bertedu.errors` / `bertedu.utils`.
Everything above (family, data, training, course, the CLI) builds on it.
"""
