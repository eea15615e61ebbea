"""`bertedu export RUN OUT`: a bertedu model as a folder that Hugging Face `transformers` loads
with its Auto classes, checked number for number against bertedu before the command ends.

    RUN                                       OUT/config.json "architectures"
    a shipped masked LM (course-en, ...),     BertForPreTraining (NSP trained: run.json's nsp)
      a `bertedu pretrain` folder               or BertForMaskedLM
    a `bertedu distill` folder                BertForMaskedLM, or BertModel when its MLM head was
                                                never trained (a student of minilm)
    minilm                                    BertModel
    a `bertedu finetune` folder               BertForSequenceClassification (id2label: the task's
                                                labels; num_labels 1: regression),
                                                BertForTokenClassification (the BIO tags),
                                                BertForQuestionAnswering

OUT also holds model.safetensors (transformers' tensor names), vocab.txt, tokenizer_config.json
(do_lower_case, model_max_length) and special_tokens_map.json: `AutoTokenizer` reads them into
the same pieces bertedu's tokenizer makes. bertedu's own folders carry `FOLDER_MARK` in their
config.json, so transformers refuses them instead of loading random weights; this is the way
from one to the other. The weights go through `bertedu.interop.to_hf` (notebook 13).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from ..errors import DataUnavailableError, OutputFolderError, SettingError, as_user_error
from ..model.constants import MERGES_NAME, VOCAB_NAME
from ..data.tokenizer import CLS, MASK, PAD, SEP, UNK
from ..utils import permissions_as_umask
from .jobs import check_creatable, make_out_folder
from .masked_lms import FINETUNE_TASK, check_masked_lm, head_untouched, mlm_head_trained, nsp_head_trained

# What the check runs both models on: English and Chinese, a pair, padding (two lengths).
CHECK_TEXTS = [("the quick brown fox jumps over the lazy dog .", "Paris is the capital of France ."),
               ("北京是中国的首都。", None)]
_TASK_CLASSES = {"classification": "BertForSequenceClassification",
                 "pair-classification": "BertForSequenceClassification",
                 "tagging": "BertForTokenClassification", "qa": "BertForQuestionAnswering"}


def load_for_export(source: str):
    """(bertedu model in eval mode, tokenizer, labels or None, transformers class name) of a
    shipped name, minilm, or a pretrain / distill / finetune folder."""
    from .finetune import load_finetuned

    if (Path(source) / FINETUNE_TASK).is_file():
        with as_user_error(f"export {source}", FileNotFoundError, KeyError):
            model, tokenizer, info = load_finetuned(source)
        return model, tokenizer, list(info["labels"]) or None, _TASK_CLASSES[info["kind"]]
    if source == "minilm":
        from ..data.tokenizer import load_vocab_tokenizer
        from ..interop import load_minilm
        from ..pretrained import minilm_vocab_path

        return load_minilm(), load_vocab_tokenizer(minilm_vocab_path(), impl="fast"), None, "BertModel"
    from .pretrain import load_masked_lm_or_run

    if Path(source).is_dir() and not mlm_head_trained(source):
        model, tokenizer = load_masked_lm_or_run(source)
        return model.bert, tokenizer, None, "BertModel"  # the encoder alone: its MLM head is noise
    check_masked_lm(source)
    model, tokenizer = load_masked_lm_or_run(source)
    if head_untouched(model):
        return model.bert, tokenizer, None, "BertModel"
    return model, tokenizer, None, "BertForPreTraining" if nsp_head_trained(source) else "BertForMaskedLM"


def export_to_transformers(source: str, out: str | Path, overwrite: bool = False) -> dict:
    """Write OUT (see the module docstring) and check it: returns {"out", "architecture",
    "labels", "checked": {transformers Auto class: max |logit difference| against bertedu}}."""
    import importlib.util

    if importlib.util.find_spec("transformers") is None:
        raise DataUnavailableError("bertedu export writes a folder for Hugging Face transformers and loads it back "
                                   "to check it: install transformers (pip install transformers, or the [course] extra)")
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise OutputFolderError(f"{out} is a file: OUT must be a folder (new or empty)")
    check_creatable(out, f"OUT {out}")
    if out.exists() and any(out.iterdir()) and not overwrite:
        raise OutputFolderError(f"{out} is not empty: choose another OUT, or pass --overwrite to replace its files")
    model, tokenizer, labels, architecture = load_for_export(source)
    if MERGES_NAME in {p.name for p in _vocab_folder(tokenizer, source).iterdir()}:
        raise SettingError(f"{source} reads a byte-level BPE vocabulary; export writes BERT's WordPiece tokenizer "
                           "files, which would cut text differently")
    with as_user_error(f"export {source}", ValueError):
        hf_model = _to_transformers(model, labels, architecture)
    make_out_folder(out, "OUT")
    _quiet_save(hf_model, out)
    _finish_config(out, architecture)
    _write_tokenizer_files(out, tokenizer, _vocab_folder(tokenizer, source) / VOCAB_NAME, model)
    summary = {"out": str(out), "architecture": architecture, "labels": labels,
               "checked": check_export(model, tokenizer, out, architecture)}
    return {**summary, **_segment_note(source)}


def _segment_note(source: str) -> dict:
    """{"note": ...} for a run fine-tuned with --no-segment-ids, which a tokenizer file cannot say."""
    results = Path(source) / "results.json"
    if results.is_file() and json.loads(results.read_text(encoding="utf-8")).get("config", {}).get("segment_ids") is False:
        return {"note": "fine-tuned with --no-segment-ids: give a pair's tokens segment 0 throughout "
                        "(tokenizer(..., return_token_type_ids=False))"}
    return {}


def _to_transformers(model, labels, architecture: str):
    """transformers' model of `architecture` with the bertedu model's weights."""
    from ..interop import to_hf

    hf_model = to_hf(model, labels)
    if architecture == "BertForMaskedLM":  # no trained NSP head: leave its tensors out of the file
        import transformers

        # BertForMaskedLM has no pooler (nor does a run that never trained NSP need one): the file holds
        # exactly the tensors the class named in config.json loads, so loading it lists none as unexpected
        masked = transformers.BertForMaskedLM(hf_model.config)
        encoder = {k: v for k, v in hf_model.bert.state_dict().items() if not k.startswith("pooler.")}
        masked.bert.load_state_dict(encoder, strict=True)
        masked.cls.predictions = hf_model.cls.predictions
        masked.tie_weights()
        hf_model = masked.eval()
    return hf_model


def _quiet_save(hf_model, out: Path) -> None:
    """save_pretrained without its progress bar."""
    import transformers

    transformers.utils.logging.disable_progress_bar()
    try:
        hf_model.save_pretrained(out)
    finally:
        transformers.utils.logging.enable_progress_bar()
    permissions_as_umask(*(p for p in out.iterdir() if p.is_file()))  # safetensors writes 0600


def _finish_config(out: Path, architecture: str) -> None:
    """config.json names the architecture (save_pretrained writes the Python class's name)."""
    path = out / "config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    config["architectures"] = [architecture]
    path.write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")


def _vocab_folder(tokenizer, source: str) -> Path:
    """The folder holding the vocab.txt the model reads."""
    from ..pretrained import MASKED_LMS, masked_lm_vocab_path, minilm_vocab_path

    if source == "minilm":
        return minilm_vocab_path().parent
    if source in MASKED_LMS:
        return masked_lm_vocab_path(source).parent
    return Path(source)


def _write_tokenizer_files(out: Path, tokenizer, vocab: Path, model) -> None:
    """vocab.txt, tokenizer_config.json and special_tokens_map.json, as BertTokenizer reads them."""
    shutil.copyfile(vocab, out / VOCAB_NAME)
    specials = {"pad_token": PAD, "unk_token": UNK, "cls_token": CLS, "sep_token": SEP, "mask_token": MASK}
    lowercase = bool(getattr(tokenizer, "lowercase", True))
    config = {"tokenizer_class": "BertTokenizer", "do_lower_case": lowercase, "strip_accents": None,
              "tokenize_chinese_chars": bool(getattr(tokenizer, "chinese_chars", True)),
              "model_max_length": model.config.max_position_embeddings, "clean_up_tokenization_spaces": False,
              **specials}
    for name, content in (("tokenizer_config.json", config), ("special_tokens_map.json", specials)):
        (out / name).write_text(json.dumps(content, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


_AUTO = {"BertModel": [], "BertForMaskedLM": ["AutoModelForMaskedLM"],
         "BertForPreTraining": ["AutoModelForMaskedLM", "AutoModelForPreTraining"],
         "BertForSequenceClassification": ["AutoModelForSequenceClassification"],
         "BertForTokenClassification": ["AutoModelForTokenClassification"],
         "BertForQuestionAnswering": ["AutoModelForQuestionAnswering"]}


@torch.no_grad()
def check_export(model, tokenizer, out: Path, architecture: str, tolerance: float = 1e-4) -> dict[str, float]:
    """Load OUT with transformers' Auto classes (AutoTokenizer included) and compare their outputs
    with the bertedu model's on `CHECK_TEXTS` (a pair and a Chinese sentence, padded): {class: max
    |difference|} of the last hidden states (AutoModel) and each head's logits, at real tokens.
    Raises when the tokenizers cut a text differently or a difference exceeds `tolerance` times the
    outputs' largest magnitude (at least 1): fp32 sums in another order (bertedu's reference attention
    against transformers' sdpa) differ by about 1e-5 of it, a wrong or missing tensor by far more."""
    import transformers

    verbosity = transformers.logging.get_verbosity()
    transformers.logging.set_verbosity_error()  # the unused-weights notes of loading a head-less class
    transformers.utils.logging.disable_progress_bar()
    try:
        hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out, local_files_only=True)
        for a, b in CHECK_TEXTS:
            if hf_tokenizer(a, b)["input_ids"] != tokenizer.encode(a, b).input_ids:
                raise RuntimeError(f"AutoTokenizer from {out} cuts {a!r} differently from bertedu's tokenizer")
        encoded = tokenizer.encode_batch([a if b is None else (a, b) for a, b in CHECK_TEXTS], pad=True)
        batch = {k: torch.as_tensor(encoded[k]) for k in ("input_ids", "token_type_ids", "attention_mask")}
        found, limits = {}, {}
        for auto in ["AutoModel", *_AUTO[architecture]]:
            hf_model = getattr(transformers, auto).from_pretrained(out, local_files_only=True).eval()
            found[auto], scale = _max_difference(_outputs(model.eval(), batch, auto), _outputs(hf_model, batch, auto),
                                                 batch["attention_mask"])
            limits[auto] = tolerance * max(1.0, scale)
    finally:
        transformers.logging.set_verbosity(verbosity)
        transformers.utils.logging.enable_progress_bar()
    if any(not found[k] <= limits[k] for k in found):
        raise RuntimeError(f"transformers' outputs differ from bertedu's by more than {tolerance:g} of their size: "
                           f"{found}")
    return found


def _outputs(model, batch: dict, auto: str) -> torch.Tensor:
    """What `auto` computes, from a bertedu or a transformers model (their output names differ)."""
    if auto == "AutoModel":
        return getattr(model, "bert", model)(**batch).last_hidden_state  # (B, T, D)
    out = model(**batch)
    if auto == "AutoModelForMaskedLM":
        return out.mlm_logits if hasattr(out, "mlm_logits") else out.logits  # (B, T, V)
    if auto == "AutoModelForPreTraining":
        return out.nsp_logits if hasattr(out, "nsp_logits") else out.seq_relationship_logits  # (B, 2)
    if auto == "AutoModelForQuestionAnswering":
        return torch.stack([out.start_logits, out.end_logits], dim=-1)  # (B, T, 2)
    return out.logits  # (B, C) or (B, T, C)


def _max_difference(ours: torch.Tensor, theirs: torch.Tensor, attention_mask: torch.Tensor) -> tuple[float, float]:
    """(max |ours - theirs|, max |ours|), over the real tokens where the outputs are per token."""
    if ours.shape != theirs.shape:
        raise RuntimeError(f"transformers' output has shape {tuple(theirs.shape)}, bertedu's {tuple(ours.shape)}")
    if ours.dim() >= 2 and ours.shape[:2] == attention_mask.shape:
        ours, theirs = ours[attention_mask.bool()], theirs[attention_mask.bool()]
    return float((ours.float() - theirs.float()).abs().max()), float(ours.float().abs().max())
