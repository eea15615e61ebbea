"""The GPU-scale paths of notebooks 07-11, run on the CPU in a smoke mode.

Each notebook's own SETTINGS cell is executed with SCALE = "gpu" and its local-copy variable
(BERTEDU_SST2_DIR, BERTEDU_CONLL2003_DIR, BERTEDU_MRPC_DIR, BERTEDU_SQUAD_DIR,
BERTEDU_WIKITEXT) pointing at small files in the real published formats: GLUE TSV folders
and CoNLL-2003 from tests/data, a SQuAD v1.1 JSON and a plain-text corpus written here.
Those settings then go through `finetune` / `pretrain` unchanged except in size (a few
steps, small batches, a tiny model for pretraining, no torch.compile on the CPU), so the
path a GPU user runs (reading the real formats from a folder, the GPU recipe's options) is
executed here. What the smoke mode does not run: the notebooks' assertions sized for the
real data sets and a real GPU's hours.
"""

import json
from pathlib import Path

import pytest

from bertedu.data.corpora import load_corpus
from bertedu.training.finetune import FinetuneConfig, finetune
from bertedu.training.pretrain import PretrainConfig, pretrain

pytestmark = pytest.mark.slow  # seconds to a minute each: deselected by the quick tier (-m 'not slow')

ROOT = Path(__file__).resolve().parent.parent
DATA = ROOT / "tests" / "data"


def gpu_settings(notebook: str, monkeypatch, env: dict) -> dict:
    """The namespace of `notebook`'s SETTINGS cell, executed at SCALE = "gpu" under `env`."""
    for key, value in env.items():
        monkeypatch.setenv(key, str(value))
    cells = json.loads((ROOT / "notebooks" / notebook).read_text(encoding="utf-8"))["cells"]
    source = next("".join(c["source"]) for c in cells if c["cell_type"] == "code"
                  and "SETTINGS = {" in "".join(c["source"]))
    namespace = {"SCALE": "gpu", "FinetuneConfig": FinetuneConfig, "print": lambda *a, **k: None}
    exec(source, namespace)  # noqa: S102: the notebook's own cell
    return namespace


def squad_v1(folder: Path) -> Path:
    """SQuAD v1.1 files (train-v1.1.json, dev-v1.1.json): the answerable questions of the
    v2.0 test files, in v1.1's layout (no is_impossible)."""
    folder.mkdir()
    for split in ("train", "dev"):
        data = json.loads((DATA / "squad_v2" / f"{split}-v2.0.json").read_text(encoding="utf-8"))
        for article in data["data"]:
            for paragraph in article["paragraphs"]:
                paragraph["qas"] = [{k: v for k, v in q.items() if k in ("id", "question", "answers")}
                                    for q in paragraph["qas"] if not q.get("is_impossible")]
        data["version"] = "1.1"
        (folder / f"{split}-v1.1.json").write_text(json.dumps(data), encoding="utf-8")
    return folder


SMOKE = dict(steps=2, batch_size=2, max_train=8, max_eval=4, progress=False, eval_every=0)


@pytest.mark.parametrize("notebook, variable, folder", [
    ("08_single_sentence_classification.ipynb", "BERTEDU_SST2_DIR", DATA / "glue" / "SST-2"),
    ("09_token_tagging.ipynb", "BERTEDU_CONLL2003_DIR", DATA / "conll2003"),
    ("10_sentence_pair_classification.ipynb", "BERTEDU_MRPC_DIR", DATA / "glue" / "MRPC"),
    ("11_extractive_qa.ipynb", "BERTEDU_SQUAD_DIR", None),
])
def test_a_gpu_scale_fine_tuning_cell_runs_on_a_local_copy(notebook, variable, folder, monkeypatch, tmp_path):
    folder = folder or squad_v1(tmp_path / "squad")
    settings = gpu_settings(notebook, monkeypatch, {variable: folder})
    gpu = settings["SETTINGS"]["gpu"]
    assert gpu["task"] == str(folder)  # the local copy replaces the Hub download
    extra = settings.get("COMMON", {})
    results = finetune(FinetuneConfig(**{**gpu, **extra, **SMOKE}, out=str(tmp_path / "run")))
    assert results["steps"] == 2 and results["dev"][results["main_metric"]] is not None


def test_the_gpu_scale_pretraining_cell_runs_on_a_local_copy(monkeypatch, tmp_path):
    corpus = tmp_path / "wikitext.txt"
    documents = list(load_corpus("wiki-en"))[:30]
    corpus.write_text("\n\n".join("\n".join(d) for d in documents) + "\n", encoding="utf-8")
    settings = gpu_settings("07_pretraining_at_scale.ipynb", monkeypatch, {"BERTEDU_WIKITEXT": corpus})
    assert settings["COMMON"]["corpus"] == str(corpus) and settings["COMMON"]["stream"]
    phases = settings["SETTINGS"]["gpu"]
    smoke = dict(preset="tiny", steps=2, batch_size=4, grad_accum_steps=1, compile=False, precision="fp32",
                 eval_every=0, max_eval_examples=8, num_workers=0)
    phase1 = tmp_path / "phase1"
    first = pretrain(PretrainConfig(**{**phases["phase1"], **settings["COMMON"], **smoke}, out=str(phase1)))
    second = pretrain(PretrainConfig(**{**phases["phase2"], **settings["COMMON"], **smoke}, init_from=str(phase1),
                                     out=str(tmp_path / "phase2")))
    assert first.step == second.step == 2
    assert phases["phase2"]["max_seq_length"] == 512  # phase 2 is BERT's 512-token phase
    # the gate before notebooks 08-11 take the run: two steps cannot have left the unigram plateau
    from bertedu.training.heldout import StillOnPlateauError, check_past_plateau
    from bertedu.training.pretrain import load_pretrained

    model, tokenizer = load_pretrained(tmp_path / "phase2")
    with pytest.raises(StillOnPlateauError, match=r"phase 2's run: held-out loss at \[MASK\]"):
        check_past_plateau(model, tokenizer, "phase 2's run", max_sequences=64)


def test_notebook_07_at_gpu_scale_is_the_route_budget_recipe_sized_to_an_hour(monkeypatch):
    """Not the paper's recipe at 2,000 steps (docs/gpu_route.md section 5: at a small budget it stays on
    the plateau): the route's streamed flags, its batch and rates, and about an hour of one H100 in tokens
    (an estimate: 54 + 6 minutes at 30% MFU by the route's FLOP count)."""
    from bertedu.cli import _config_from_args, build_parser
    from bertedu.course.flops import budget_tokens
    from bertedu.model.config import BertConfig
    from bertedu.training.pretrain import BUDGET_RECIPE

    settings = gpu_settings("07_pretraining_at_scale.ipynb", monkeypatch, {})
    phases, common = settings["SETTINGS"]["gpu"], settings["COMMON"]
    recipe = _config_from_args(PretrainConfig, build_parser().parse_args(
        ["pretrain", *BUDGET_RECIPE["streamed_flags"], "--steps", "1"]))
    for name, T, minutes, lr in (("phase1", 128, 54, 5e-4), ("phase2", 512, 6, 2e-4)):
        extra = {"init_from": "x"} if name == "phase2" else {}
        cfg = PretrainConfig(**phases[name], **common, out="unused", **extra)
        assert (cfg.nsp, cfg.mlm_probability, cfg.stream) == (recipe.nsp, recipe.mlm_probability, recipe.stream)
        assert cfg.preset == "base" and cfg.max_seq_length == T and cfg.lr == lr and cfg.steps is None
        assert cfg.batch_size * cfg.grad_accum_steps == 1024  # the route's global batch
        assert cfg.max_tokens == budget_tokens(BertConfig.base(), minutes * 60, T, 0.3)
    assert 1.5e9 < phases["phase1"]["max_tokens"] < 2e9


@pytest.mark.parametrize("notebook, variable, folder", [
    ("08_single_sentence_classification.ipynb", "BERTEDU_SST2_DIR", DATA / "glue" / "SST-2"),
    ("09_token_tagging.ipynb", "BERTEDU_CONLL2003_DIR", DATA / "conll2003"),
])
def test_at_gpu_scale_the_notebooks_fine_tune_the_model_notebook_07_pretrained(notebook, variable, folder, monkeypatch,
                                                                             tmp_path):
    """docs/gpu_route.md: $BERTEDU_PRETRAINED names the pretraining run, and the SETTINGS cell's
    gpu init is that run (MiniLM when it is unset, as the test above runs)."""
    corpus = tmp_path / "wiki.txt"
    corpus.write_text("\n\n".join("\n".join(d) for d in list(load_corpus("wiki-en"))[:20]) + "\n", encoding="utf-8")
    run = tmp_path / "phase2"
    pretrain(PretrainConfig(corpus=str(corpus), preset="tiny", steps=2, batch_size=4, max_seq_length=128, eval_every=0,
                            max_eval_examples=8, vocab_size=300, out=str(run)))
    settings = gpu_settings(notebook, monkeypatch, {variable: folder, "BERTEDU_PRETRAINED": run})
    gpu = settings["SETTINGS"]["gpu"]
    assert gpu["init"] == str(run)
    results = finetune(FinetuneConfig(**{**gpu, **SMOKE}, out=str(tmp_path / "fine")))
    assert results["steps"] == 2
    twin = settings.get("TWINS", {}).get("gpu")
    if twin:  # notebook 09's random twin has the pretrained run's size and vocabulary
        assert twin["vocab"] == str(run / "vocab.txt")
    monkeypatch.delenv("BERTEDU_PRETRAINED")
    assert gpu_settings(notebook, monkeypatch, {variable: folder})["SETTINGS"]["gpu"]["init"] == "minilm"
