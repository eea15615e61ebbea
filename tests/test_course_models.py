"""The course's own masked LMs, pretrained from random weights by one `bertedu pretrain`
command each (bertedu/weights/<name>/COMMAND.md): they load by name, sha256-checked, fill
in words from their context, and score on their run's held-out set what the run recorded."""

import json

import pytest

from bertedu.data import collate_pretraining
from bertedu.errors import SettingError
from bertedu.data.corpora import load_corpus
from bertedu.training.pretrain import document_data, fill_mask, held_out_measure, heldout_dataset, run_config
from bertedu.pretrained import MASKED_LMS, load_masked_lm, masked_lm_dir, trained_length
from bertedu.training.loop import evaluate

pytestmark = pytest.mark.slow  # seconds to a minute each: deselected by the quick tier (-m 'not slow')

# name -> (held-out MLM accuracy its last run recorded at its last step (course-en's third phase, the
#          Chinese models' second),
#          probes: (text, a token expected among the best k, k))
COURSE_MODELS = {
    "course-zh": (0.4215, [("中国的首都是北[MASK]。", "京", 1), ("我们要努力学[MASK]。", "习", 1)]),
    # whole-word masks: it learnt to guess hidden words (努力发展, "strive to develop"), and never saw a
    # half-hidden one, so it does not complete 北[MASK] to 北京 (notebook 19)
    "course-zh-wwm": (0.2334, [("我们要努力[MASK][MASK]。", "发", 1), ("我国[MASK][MASK]建设取得了很大成就。", "经", 1)]),
    # the English model knows which kind of word fits (a verb, an office, a role), not facts
    "course-en": (0.3327, [("she [MASK] a book .", "wrote", 5), ("many people [MASK] in the city .", "live", 5),
                           ("the city is the [MASK] of the province .", "capital", 2),  # after "largest", which fits too
                           ("he was elected [MASK] of the party .", "president", 1)]),
}


@pytest.mark.parametrize("name", sorted(COURSE_MODELS))
def test_registered_with_its_command_and_run_settings(name):
    assert name in MASKED_LMS
    folder = masked_lm_dir(name)
    assert "bertedu pretrain" in (folder / "COMMAND.md").read_text(encoding="utf-8")
    settings = json.loads((folder / "run.json").read_text(encoding="utf-8"))
    # from random weights, or a later phase from its own earlier one (COMMAND.md has every command)
    assert settings["init_from"] in (None, name)
    assert settings["trained_length"] == 128 == trained_length(name)  # the length the course feeds it


@pytest.mark.parametrize("name", sorted(COURSE_MODELS))
def test_fills_words_from_their_context(name):
    model, tokenizer = load_masked_lm(name)
    for text, expected, k in COURSE_MODELS[name][1]:
        best = [token for token, _ in fill_mask(model, tokenizer, text, top_k=k)[0]]
        assert expected in best, (text, fill_mask(model, tokenizer, text))


@pytest.mark.parametrize("name", sorted(COURSE_MODELS))
def test_held_out_accuracy_is_the_recorded_one(name):
    cfg = run_config(name)
    model, tokenizer = load_masked_lm(name)
    if cfg.packing == "documents":  # the run's own measure: its held-out documents in runs of --max-seq-length
        _, held_out = document_data(cfg, load_corpus(cfg.corpus), tokenizer)
        accuracy = held_out_measure(cfg, tokenizer, held_out)(model)["mlm_accuracy"]
    else:  # sentence pairs, as many held-out examples as the run evaluated on
        data = heldout_dataset(cfg, tokenizer)
        assert len(data) == cfg.max_eval_examples
        collate = lambda examples, _: collate_pretraining(examples, pad_token_id=tokenizer.pad_token_id)  # noqa: E731
        accuracy = evaluate(model, data, collate, cfg.batch_size, cfg.seed, precision="fp32")["mlm_accuracy"]
    assert accuracy == pytest.approx(COURSE_MODELS[name][0], abs=0.005)  # the shipped fp16 weights here, the run its own


def test_a_documents_run_has_no_example_held_out_set_but_rebuilds_one_as_pairs():
    """course-en's last phase read whole documents: heldout_dataset names the measure that run used,
    and rebuilds its held-out documents as sentence pairs when asked (benchmarks/course_lengths.py)."""
    _, tokenizer = load_masked_lm("course-en")
    with pytest.raises(SettingError, match="held_out_measure"):
        heldout_dataset(run_config("course-en"), tokenizer)
    # wiki-en's 5 held-out articles make 415 pairs at 128 tokens (fewer than --max-eval-examples 512)
    assert len(heldout_dataset(run_config("course-en", packing="pairs"), tokenizer)) == 415
