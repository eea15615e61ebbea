"""`bertedu export RUN OUT` writes folders that transformers' Auto classes load and that compute
what bertedu computes, head by head; bertedu's own folders are refused by transformers loudly.

Each check here loads the exported folder with transformers independently of the command's own
check (`to_transformers.check_export`), and compares logits on a padded batch at the real tokens."""

import json

import pytest
import torch

from bertedu.cli import main
from bertedu.training.to_transformers import check_export, export_to_transformers
from tiny_runs import TAGS, TOPICS, finetune_run, pretrain_run

transformers = pytest.importorskip("transformers")
TEXTS = [("the quick brown fox jumps over the lazy dog .", "he loved every minute"), ("北京是中国的首都。", None)]
AUTO = {"classification": "AutoModelForSequenceClassification", "pair-classification": "AutoModelForSequenceClassification",
        "tagging": "AutoModelForTokenClassification", "qa": "AutoModelForQuestionAnswering"}


def _batch(tokenizer):
    enc = tokenizer.encode_batch([a if b is None else (a, b) for a, b in TEXTS], pad=True)
    return {k: torch.as_tensor(enc[k]) for k in ("input_ids", "token_type_ids", "attention_mask")}


def _logits(out):
    if hasattr(out, "start_logits"):
        return torch.stack([out.start_logits, out.end_logits], -1)
    return out.mlm_logits if hasattr(out, "mlm_logits") else out.logits


def _max_diff(ours, theirs, mask):
    if ours.dim() >= 2 and ours.shape[:2] == mask.shape:
        ours, theirs = ours[mask.bool()], theirs[mask.bool()]
    return float((ours - theirs).abs().max())


@pytest.mark.parametrize("kind", ["classification", "pair-classification", "tagging", "qa"])
def test_each_fine_tuned_head_loads_with_the_auto_classes_and_gives_bertedus_logits(kind, tmp_path):
    from bertedu.training.finetune import load_finetuned

    run = finetune_run(tmp_path / "run", kind)
    result = export_to_transformers(str(run), tmp_path / "hf")
    model, tokenizer, info = load_finetuned(run)
    out = tmp_path / "hf"
    config = json.loads((out / "config.json").read_text())
    assert config["model_type"] == "bert" and config["architectures"] == [result["architecture"]]
    if info["labels"]:
        assert config["id2label"] == {str(i): name for i, name in enumerate(info["labels"])}
        assert config["label2id"] == {name: i for i, name in enumerate(info["labels"])}
    assert json.loads((out / "tokenizer_config.json").read_text())["do_lower_case"] is True
    assert json.loads((out / "special_tokens_map.json").read_text())["mask_token"] == "[MASK]"

    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    assert [hf_tokenizer(a, b)["input_ids"] for a, b in TEXTS] == [tokenizer.encode(a, b).input_ids for a, b in TEXTS]
    batch = _batch(tokenizer)
    hf_model = getattr(transformers, AUTO[kind]).from_pretrained(out).eval()
    with torch.no_grad():
        diff = _max_diff(_logits(model(**batch)), _logits(hf_model(**batch)), batch["attention_mask"])
        encoder = _max_diff(model.bert(**batch).last_hidden_state,
                            transformers.AutoModel.from_pretrained(out)(**batch).last_hidden_state,
                            batch["attention_mask"])
    print(f"{kind}: {AUTO[kind]} max |logit difference| {diff:.3g}, AutoModel {encoder:.3g}")
    assert diff <= 1e-4 and encoder <= 1e-4  # 0 on this project's CPUs: the same fp32 operations in the same order
    assert set(result["checked"]) == {"AutoModel", AUTO[kind]} and max(result["checked"].values()) <= 1e-4


def test_a_shipped_masked_lm_by_name_and_a_pretraining_run_with_nsp(tmp_path):
    from bertedu.pretrained import load_masked_lm
    from bertedu.training.pretrain import load_pretrained

    result = export_to_transformers("course-en", tmp_path / "course-en")
    assert result["architecture"] == "BertForMaskedLM"  # course-en's last phase ran --no-nsp: no NSP tensors
    model, tokenizer = load_masked_lm("course-en")
    batch = _batch(tokenizer)
    hf_model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "course-en").eval()
    with torch.no_grad():
        diff = _max_diff(model(**batch).mlm_logits, hf_model(**batch).logits, batch["attention_mask"])
    print(f"course-en: AutoModelForMaskedLM max |logit difference| {diff:.3g}")
    assert diff <= 1e-4

    run = pretrain_run(tmp_path / "run", nsp=True)
    assert export_to_transformers(str(run), tmp_path / "hf")["architecture"] == "BertForPreTraining"
    model, tokenizer = load_pretrained(run)
    batch = _batch(tokenizer)
    hf_model = transformers.AutoModelForPreTraining.from_pretrained(tmp_path / "hf").eval()
    with torch.no_grad():
        ours, theirs = model(**batch), hf_model(**batch)
    assert torch.allclose(ours.nsp_logits, theirs.seq_relationship_logits, atol=1e-4)
    assert _max_diff(ours.mlm_logits, theirs.prediction_logits, batch["attention_mask"]) <= 1e-4


def test_a_student_of_minilm_exports_its_encoder_alone(tmp_path):
    """Its MLM head was never trained (MiniLM has none): the folder holds a BertModel."""
    run = pretrain_run(tmp_path / "student", distilled_from="minilm")
    result = export_to_transformers(str(run), tmp_path / "hf")
    assert result["architecture"] == "BertModel" and set(result["checked"]) == {"AutoModel"}
    from safetensors import safe_open

    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as f:
        assert not any("predictions" in k or "seq_relationship" in k for k in f.keys())
    untouched = pretrain_run(tmp_path / "untouched", trained_head=False)  # whatever its folder says
    assert export_to_transformers(str(untouched), tmp_path / "hf2")["architecture"] == "BertModel"


def test_the_check_tolerates_another_summation_order(tmp_path):
    """bertedu's reference attention (an explicit softmax) against transformers' sdpa: the same
    function, summed in another order; the check passes with differences of about 1e-5 of the
    logits' size."""
    from bertedu.pretrained import load_masked_lm

    export_to_transformers("course-en", tmp_path / "hf")
    model, tokenizer = load_masked_lm("course-en")
    model.bert.set_attn_implementation("reference")
    found = check_export(model, tokenizer, tmp_path / "hf", "BertForMaskedLM")
    assert 0 < found["AutoModelForMaskedLM"] < 1e-2


def test_the_check_catches_an_export_whose_numbers_differ(tmp_path):
    from safetensors.torch import load_file, save_file

    from bertedu.training.finetune import load_finetuned

    run = finetune_run(tmp_path / "run", "classification")
    export_to_transformers(str(run), tmp_path / "hf")
    weights = tmp_path / "hf" / "model.safetensors"
    state = load_file(str(weights))
    state["classifier.bias"] = state["classifier.bias"] + 0.01
    save_file(state, str(weights), metadata={"format": "pt"})
    model, tokenizer, _ = load_finetuned(run)
    with pytest.raises(RuntimeError, match="differ from bertedu's"):
        check_export(model, tokenizer, tmp_path / "hf", "BertForSequenceClassification")


def test_bertedu_folders_are_refused_by_transformers_and_still_read_by_bertedu(tmp_path):
    from bertedu.pretrained import load_masked_lm, masked_lm_dir
    from bertedu.training.finetune import load_finetuned

    run = finetune_run(tmp_path / "run", "classification")
    for folder in (masked_lm_dir("course-en"), run / "model"):
        for cls in ("BertForMaskedLM", "BertModel", "AutoModel", "AutoModelForSequenceClassification"):
            with pytest.raises(Exception, match="bertedu export"):  # was: a model with a random encoder, silently
                getattr(transformers, cls).from_pretrained(folder)
    assert load_masked_lm("course-en")[0].config.hidden_size == 256
    assert load_finetuned(run)[2]["labels"] == TOPICS


def test_to_hf_refuses_what_transformers_cannot_compute(tmp_path):
    from bertedu.interop import to_hf
    from bertedu.training.finetune import load_finetuned

    mean = load_finetuned(finetune_run(tmp_path / "mean", "classification", pooling="mean"))[0]
    with pytest.raises(ValueError, match="--pooling pooler"):
        to_hf(mean)
    crf = load_finetuned(finetune_run(tmp_path / "crf", "tagging", head="crf"))[0]
    with pytest.raises(ValueError, match="--head softmax"):
        to_hf(crf, TAGS)
    assert main(["export", str(tmp_path / "crf"), str(tmp_path / "out")]) == 2


def test_export_on_the_command_line(tmp_path, capsys):
    run = finetune_run(tmp_path / "run", "tagging")
    assert main(["export", str(run), str(tmp_path / "hf")]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["architecture"] == "BertForTokenClassification" and printed["labels"] == TAGS
    assert main(["export", str(run), str(tmp_path / "hf")]) == 2  # OUT holds files
    assert "is not empty" in capsys.readouterr().err
    assert main(["export", "course-em", str(tmp_path / "x")]) == 2
    assert "did you mean course-en" in capsys.readouterr().err


def test_a_run_without_segment_ids_says_how_to_feed_it(tmp_path):
    run = finetune_run(tmp_path / "run", "pair-classification")
    results = json.loads((run / "results.json").read_text())
    results["config"]["segment_ids"] = False
    (run / "results.json").write_text(json.dumps(results))
    assert "return_token_type_ids=False" in export_to_transformers(str(run), tmp_path / "hf")["note"]


# ---- issue 60 case 6 ---------------------------------------------------------------------------------
def test_a_masked_lm_loads_as_the_architecture_its_config_names_with_no_unexpected_or_missing_tensors(tmp_path):
    """A run without NSP exports as BertForMaskedLM, which has no pooler: the file holds no
    bert.pooler.* tensors (transformers printed them as UNEXPECTED on every load)."""
    import contextlib
    import io

    from safetensors import safe_open

    run = pretrain_run(tmp_path / "run", nsp=False)
    assert export_to_transformers(str(run), tmp_path / "hf")["architecture"] == "BertForMaskedLM"
    config = json.loads((tmp_path / "hf" / "config.json").read_text())
    assert config["architectures"] == ["BertForMaskedLM"]
    with safe_open(str(tmp_path / "hf" / "model.safetensors"), "pt") as f:
        assert not [k for k in f.keys() if "pooler" in k or "seq_relationship" in k]
    shown = io.StringIO()
    with contextlib.redirect_stderr(shown), contextlib.redirect_stdout(shown):
        model, info = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "hf", output_loading_info=True)
    assert not info["unexpected_keys"] and not info["missing_keys"] and not info["mismatched_keys"], info
    assert "UNEXPECTED" not in shown.getvalue() and "pooler" not in shown.getvalue()


def test_each_module_is_named_for_what_it_does():
    """`bertedu export` lives in training/to_transformers.py; shipping a run as a course model
    folder in training/ship.py: no module called export any more, so neither is mistaken for the other."""
    import importlib.util

    from bertedu.training import ship, to_transformers

    assert callable(to_transformers.export_to_transformers) and callable(ship.ship_pretrain_run)
    assert importlib.util.find_spec("bertedu.training.export") is None
    assert importlib.util.find_spec("bertedu.training.hf_export") is None
