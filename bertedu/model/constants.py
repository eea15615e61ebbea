"""Constants more than one module needs, defined once (a leaf module: it imports nothing).

IGNORE_INDEX  the label of a position no loss may count: every token the MLM did not
              select, a word's continuation pieces in tagging, padding. It is the default
              `ignore_index` of `torch.nn.functional.cross_entropy`.
VOCAB_NAME    the vocabulary file every run folder keeps beside its weights.
MERGES_NAME   beside it, the merges of a byte-level BPE vocabulary (none for WordPiece).
FOLDER_MARK   two keys every bertedu config.json holds besides the config's fields, so that
              `transformers` refuses a bertedu folder loudly (AutoModel: an unknown model_type;
              BertForMaskedLM and the other classes: no torch dtype of that name) instead of
              loading it with random weights, its tensor names not being transformers'. Readers
              of a config.json drop them; `bertedu export` writes a folder transformers reads.
ATTENTION_KERNEL_NAMES  the attention kernels a config may name (`model/attention.py` holds them;
              `model/config.py` validates against these names without importing the kernels).
"""

IGNORE_INDEX = -100
VOCAB_NAME = "vocab.txt"
MERGES_NAME = "merges.txt"
ATTENTION_KERNEL_NAMES = ("reference", "sdpa")
NOT_TRANSFORMERS = "bertedu, not transformers: make a transformers folder with `bertedu export RUN OUT`"
FOLDER_MARK = {"model_type": NOT_TRANSFORMERS, "torch_dtype": NOT_TRANSFORMERS}
