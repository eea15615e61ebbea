"""bertedu.course.lm_study: notebook 17's windows, cloze sentences, fills and two-sense probe.

A 200-piece vocabulary over two short made-up articles keeps every test to a second or two.
"""

import math

import pytest
import torch
import torch.nn.functional as F

from bertedu.course import lm_study
from bertedu.family.elmo import ELMoConfig, ELMoStyleLM
from bertedu.family.gpt import CausalLM, GPTConfig
from bertedu.model.constants import IGNORE_INDEX

DOCS = [
    ["the river ran past the old mill and the mill stood still .", "in may the water rose over the bank of the river ."],
    ["a small boat sailed down the river to the sea .", "the people of the town left their homes in the war ."],
]


@pytest.fixture(scope="module")
def tokenizer(tmp_path_factory):
    return lm_study.study_tokenizer(DOCS, tmp_path_factory.mktemp("vocab") / "vocab.txt", size=200)


def test_windows_are_the_articles_pieces_cut_into_cls_30_sep(tokenizer):
    ids = lm_study.windows(tokenizer, DOCS * 3, length=8)  # (n, 8): [CLS] + 6 pieces + [SEP]
    assert ids.shape[1] == 8
    assert torch.all(ids[:, 0] == tokenizer.cls_token_id) and torch.all(ids[:, -1] == tokenizer.sep_token_id)
    first_doc = [i for s in DOCS[0] for i in tokenizer.convert_tokens_to_ids(tokenizer.tokenize(s))]
    per_doc = len(first_doc) // 6  # whole windows only: the rest of an article is dropped
    assert ids[:per_doc, 1:-1].flatten().tolist() == first_doc[: 6 * per_doc]


def test_the_vocabulary_keeps_specials_and_characters_and_the_most_used_pieces(tokenizer, tmp_path):
    pieces = {p for doc in DOCS for s in doc for p in tokenizer.tokenize(s)}
    assert len(tokenizer) <= 200 and all(p in tokenizer.vocab for p in pieces)  # room for every piece used
    for piece in ("[PAD]", "[MASK]", "a", "##a", ".", "the", "river"):
        assert piece in tokenizer.vocab, piece
    small = lm_study.study_tokenizer(DOCS, tmp_path / "vocab.txt", size=len(tokenizer) - 1)
    assert "the" in small.vocab and len(small) == len(tokenizer) - 1  # the rarest piece went first


def test_cloze_takes_the_middle_word_of_sentences_of_8_to_24_words(tokenizer):
    cloze = lm_study.cloze_sentences(tokenizer, DOCS)
    # "the river ran past the old mill and the mill stood still ." has 13 words: the middle (index 6) is "mill"
    assert ("the river ran past the old", "mill", "and the mill stood still .") in cloze
    for left, word, right in cloze:
        n = len(left.split()) + 1 + len(right.split())
        assert 8 <= n <= 24 and len(left.split()) == n // 2 and word in tokenizer.vocab
    assert lm_study.words_of(tokenizer, "sailed") == ["sailed"]  # pieces joined back into the word


def test_bert_collate_never_masks_cls_or_sep(tokenizer):
    rows = list(lm_study.windows(tokenizer, DOCS * 20, length=8))
    batch = lm_study.collate_for("bert", tokenizer)(rows, torch.Generator().manual_seed(0))
    assert torch.all(batch["labels"][:, [0, -1]] == IGNORE_INDEX)
    assert torch.all(batch["input_ids"][:, [0, -1]] == torch.stack(rows)[:, [0, -1]])
    chosen = (batch["labels"] != IGNORE_INDEX).float().mean()
    assert 0.05 < chosen < 0.3  # about 15% of the 6 inner pieces
    lm = lm_study.collate_for("elmo", tokenizer)(rows)
    assert torch.equal(lm["input_ids"], lm["labels"])


def test_three_kinds_read_the_same_tokens_and_are_the_same_size(tokenizer):
    train_ids = lm_study.windows(tokenizer, DOCS * 20, length=8)
    recipe = lm_study.study_recipe(steps=2, seed=3, batch_size=4)
    runs = {kind: lm_study.train_lm(kind, tokenizer, train_ids, recipe) for kind in lm_study.KINDS}
    assert {run.tokens_seen for _, run in runs.values()} == {2 * 4 * 8}
    V = len(tokenizer)
    assert runs["elmo"][0].num_parameters() - runs["bert"][0].num_parameters() == V
    assert not runs["elmo"][0].training  # returned in eval mode
    torch.testing.assert_close(lm_study.new_model("gpt", V, seed=3).gpt.embeddings.word_embeddings.weight,
                               lm_study.new_model("gpt", V, seed=3).gpt.embeddings.word_embeddings.weight)
    with pytest.raises(ValueError, match="unknown model kind"):
        lm_study.new_model("lstm", V)


def small_elmo(V):
    torch.manual_seed(0)
    model = ELMoStyleLM(ELMoConfig.tiny(vocab_size=V, embedding_size=16, hidden_size=24, dropout=0.0)).eval()
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.3 * torch.randn_like(p))  # an untrained model with opinions
    return model


def test_fill_two_sided_reads_the_hidden_position_from_both_lms_by_hand(tokenizer):
    model = small_elmo(len(tokenizer))
    cloze = [("the river ran", "past", "the old mill ."), ("in", "may", "the water rose over the bank .")]
    both = lm_study.fill_two_sided(model, tokenizer, cloze)
    left = lm_study.fill_two_sided(model, tokenizer, cloze, sides="left")
    right = lm_study.fill_two_sided(model, tokenizer, cloze, sides="right")
    special = sorted(tokenizer.special_ids)
    for k, (l, _, r) in enumerate(cloze):  # each row alone, unpadded, with a different placeholder at t
        l_ids = [tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(tokenizer.tokenize(l))]
        r_ids = [*tokenizer.convert_tokens_to_ids(tokenizer.tokenize(r)), tokenizer.sep_token_id]
        row = torch.tensor([[*l_ids, tokenizer.vocab["the"], *r_ids]])
        t = len(l_ids)
        with torch.no_grad():
            out = model(row)
        fwd = F.log_softmax(out.forward_logits[0, t - 1], -1)  # the left LM's guess of t
        bwd = F.log_softmax(out.backward_logits[0, t + 1], -1)  # the right LM's guess of t
        for guess, scores in [(both, fwd + bwd), (left, fwd), (right, bwd)]:
            scores[special] = -math.inf
            assert int(guess[k]) == int(scores.argmax())
    with pytest.raises(ValueError, match="sides"):
        lm_study.fill_two_sided(model, tokenizer, cloze, sides="middle")


def test_fill_left_only_is_the_next_piece_after_the_unpadded_left_side(tokenizer):
    torch.manual_seed(0)
    gpt = CausalLM(GPTConfig.tiny(vocab_size=len(tokenizer), hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    lefts = ["the river ran past the old", "in"]
    guesses = lm_study.fill_left_only(gpt, tokenizer, lefts)
    for k, left in enumerate(lefts):
        row = torch.tensor([[tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(tokenizer.tokenize(left))]])
        with torch.no_grad():
            scores = gpt(row).logits[0, -1]
        scores[sorted(tokenizer.special_ids)] = -math.inf
        assert int(guesses[k]) == int(scores.argmax())


def test_fill_masked_unclosed_reads_no_sep_and_closed_reads_it(tokenizer):
    """closed=False hides the closing [SEP]: the same guess as the row cut before it; closed=True reads it."""
    from bertedu import BertConfig
    from bertedu.model.heads import BertForMaskedLM

    torch.manual_seed(0)
    bert = BertForMaskedLM(BertConfig.tiny(vocab_size=len(tokenizer), hidden_dropout_prob=0.0,
                                           attention_probs_dropout_prob=0.0)).eval()
    texts = ["the river ran past the [MASK]", "in [MASK]"]
    with torch.no_grad():
        open_guess = lm_study.fill_masked(bert, tokenizer, texts, closed=False)
        closed_guess = lm_study.fill_masked(bert, tokenizer, texts)
        for k, text in enumerate(texts):
            row = torch.tensor([[tokenizer.cls_token_id, *tokenizer.convert_tokens_to_ids(tokenizer.tokenize(text))]])
            scores = bert(row).mlm_logits[0, -1]  # no [SEP] at all: the [MASK] is the last token
            scores[sorted(tokenizer.special_ids)] = -math.inf
            assert int(open_guess[k]) == int(scores.argmax())
            with_sep = torch.cat([row, torch.tensor([[tokenizer.sep_token_id]])], 1)
            scores = bert(with_sep).mlm_logits[0, -2]
            scores[sorted(tokenizer.special_ids)] = -math.inf
            assert int(closed_guess[k]) == int(scores.argmax())


def test_split_rank_on_fixtures_by_hand():
    first = torch.arange(8) < 4
    two_clusters = torch.tensor([[1.0, 0.1]] * 4 + [[0.1, 1.0]] * 4) + 0.01 * torch.arange(8.0)[:, None]
    gap, rank, n = lm_study.split_rank(two_clusters, first)
    assert n == math.comb(8, 4) // 2 == 35
    assert rank == 1 and gap > 0.5
    # one vector eight times (word2vec): every split ties at 0, and a tie counts against the sense split
    assert lm_study.split_rank(torch.ones(8, 3), first)[:2] == (0.0, 35)
    # the sense split is the worst when the clusters cross it: each sense half in each cluster
    crossed = two_clusters[[0, 4, 1, 5, 2, 6, 3, 7]]
    assert lm_study.split_rank(crossed, first)[1] > 1
    # the gap by hand for the two-cluster fixture
    x = F.normalize(two_clusters.double(), dim=-1)
    c = x @ x.T
    within = [c[i, j] for i in range(8) for j in range(8) if i != j and (i < 4) == (j < 4)]
    across = [c[i, j] for i in range(8) for j in range(8) if (i < 4) != (j < 4)]
    assert gap == pytest.approx(float(sum(within) / len(within) - sum(across) / len(across)))


def test_word_vectors_need_the_word_once_as_one_piece(tokenizer):
    encode = lambda b: torch.nn.functional.one_hot(b["input_ids"], len(tokenizer)).float()  # noqa: E731
    v = lm_study.word_vectors(encode, tokenizer, ["the river ran .", "a river ."], "river")
    assert v.shape == (2, len(tokenizer)) and torch.all(v[:, tokenizer.vocab["river"]] == 1)
    with pytest.raises(ValueError, match="exactly once"):
        lm_study.word_vectors(encode, tokenizer, ["the river and the river ."], "river")


def test_paired_se_and_the_baseline_word(tokenizer):
    a = torch.tensor([1, 0, 1, 1, 0, 1, 0, 1] * 8).bool()
    assert lm_study.paired_se(a, a) == 0.0
    b = torch.zeros(64, dtype=torch.bool)
    d = a.double()
    assert lm_study.paired_se(a, b) == pytest.approx(float(d.std(unbiased=False)) / math.sqrt(64), rel=0.1)
    train_ids = lm_study.windows(tokenizer, DOCS * 3, length=8)
    assert lm_study.most_frequent_word(tokenizer, train_ids) == "the"


def test_a_saved_elmo_loads_as_it_was_trained_and_refuses_another_recipe_or_vocabulary(tokenizer, tmp_path):
    ids = lm_study.windows(tokenizer, DOCS * 3, length=8)
    recipe = lm_study.study_recipe(steps=2, seed=0, batch_size=4)
    model, run = lm_study.train_lm("elmo", tokenizer, ids, recipe)
    folder = lm_study.save_lm(model, run, recipe, tokenizer, tmp_path / "elmo", "a test", "this machine")
    loaded, loaded_run = lm_study.load_elmo(tokenizer, recipe, folder)
    assert not loaded.training
    for (name, a), (_, b) in zip(model.state_dict().items(), loaded.state_dict().items()):
        assert torch.equal(a, b), name
    assert (loaded_run.step, loaded_run.tokens_seen, loaded_run.loss) == (run.step, run.tokens_seen, run.loss)
    assert [r["loss"] for r in loaded_run.records] == [r["loss"] for r in run.records]
    with pytest.raises(ValueError, match=r"another recipe: \(shipped, asked\) \{'steps': \(2, 3\)\}"):
        lm_study.load_elmo(tokenizer, lm_study.study_recipe(steps=3, seed=0, batch_size=4), folder)
    other = lm_study.study_tokenizer(DOCS, tmp_path / "other.txt", size=len(tokenizer) - 1)
    with pytest.raises(ValueError, match="another vocabulary"):
        lm_study.load_elmo(other, recipe, folder)


def test_a_changed_shipped_file_is_refused(tokenizer, tmp_path):
    import shutil

    from bertedu.pretrained import WeightsIntegrityError

    folder = shutil.copytree(lm_study.ELMO_WEIGHTS, tmp_path / "elmo-study")
    run_json = folder / "run.json"
    run_json.write_text(run_json.read_text(encoding="utf-8").replace('"steps": 400', '"steps": 401', 1), encoding="utf-8")
    with pytest.raises(WeightsIntegrityError, match="run.json has sha256"):
        lm_study.load_elmo(tokenizer, lm_study.study_recipe(), folder)


@pytest.mark.parametrize("kind", lm_study.KINDS)
def test_each_shipped_model_is_notebook_17s_recipe_on_its_vocabulary(kind, tmp_path):
    train_docs, _ = lm_study.study_text()
    study = lm_study.study_tokenizer(train_docs, tmp_path / "vocab.txt")
    bert = lm_study.new_model("bert", len(study))
    model, run = lm_study.load_lm(kind, study, lm_study.study_recipe(steps=400, seed=0, kind=kind))  # recipe, vocabulary
    assert type(model) is type(lm_study.new_model(kind, len(study))) and not model.training
    extra = {"bert": 0, "gpt": None, "elmo": len(study)}[kind]  # ELMo: BERT tiny's size plus V
    if extra is not None:
        assert model.num_parameters() - bert.num_parameters() == extra
    assert run.step == len(run.records) == 400 and run.tokens_seen == 400 * 32 * lm_study.T
    assert run.records[-1]["loss"] < run.records[0]["loss"] - 1  # it trained
    with pytest.raises(ValueError, match="another recipe"):
        lm_study.load_lm(kind, study, lm_study.study_recipe(steps=400, seed=1, kind=kind))


def test_a_shipped_model_of_another_kind_is_refused(tmp_path):
    study = lm_study.study_tokenizer(lm_study.study_text()[0], tmp_path / "vocab.txt")
    with pytest.raises(ValueError, match="another recipe|another shape"):
        lm_study.load_lm("gpt", study, lm_study.study_recipe(steps=400, seed=0, kind="gpt"), lm_study.WEIGHTS["bert"])


def test_each_kind_gets_its_own_learning_rate_and_the_sweep_chose_it():
    import json

    assert lm_study.study_recipe(kind="elmo").lr == lm_study.STUDY_LR["elmo"]
    assert lm_study.study_recipe().lr == 2e-3 and lm_study.study_recipe(lr=5e-3, kind="gpt").lr == 5e-3
    with pytest.raises(ValueError, match="unknown model kind"):
        lm_study.study_recipe(kind="lstm")
    swept = json.loads((lm_study.WEIGHTS_DIR / "elmo_study.json").read_text(encoding="utf-8"))["lr_sweep"]
    assert swept["chosen"] == lm_study.STUDY_LR and swept["selected_by"] == lm_study.SELECTED_BY
    for kind, by_rate in swept["losses"].items():  # the chosen rate has the lowest loss of the measure selected by
        scored = {float(lr): m[lm_study.SELECTED_BY[kind]] for lr, m in by_rate.items() if m is not None}
        assert min(scored, key=scored.get) == lm_study.STUDY_LR[kind]
    assert swept["command"].startswith("python benchmarks/elmo_study.py --sweep")


def test_the_validation_articles_are_neither_trained_on_nor_compared_on():
    train_docs, held_out_docs = lm_study.study_text()
    validation = lm_study.validation_text()
    assert len(validation) == 4
    assert not any(doc in validation for doc in [*train_docs, *held_out_docs])


def test_held_out_losses_are_the_models_own_losses(tokenizer):
    ids = lm_study.windows(tokenizer, DOCS * 3, length=8)  # (n, 8)
    gpt, elmo = lm_study.new_model("gpt", len(tokenizer), seed=1).eval(), small_elmo(len(tokenizer))
    labels = ids.clone()
    labels[:, -1] = IGNORE_INDEX  # the closing [SEP] is not scored
    with torch.no_grad():
        torch.testing.assert_close(lm_study.next_token_losses(gpt, ids).mean(), gpt(ids, labels=labels).loss)
        torch.testing.assert_close(lm_study.next_token_losses(elmo, ids).mean(), elmo(ids, labels=labels).forward_loss)
        no_cls = ids.clone()
        no_cls[:, 0] = IGNORE_INDEX  # the opening [CLS] is not scored either way
        torch.testing.assert_close(lm_study.previous_token_losses(elmo, ids).mean(),
                                   elmo(ids, labels=no_cls).backward_loss)
    assert set(lm_study.held_out_measures("elmo", elmo, tokenizer, ids)) >= {lm_study.SELECTED_BY["elmo"]}
    assert set(lm_study.held_out_measures("gpt", gpt, tokenizer, ids)) == {lm_study.SELECTED_BY["gpt"]}


def test_masked_lm_losses_say_what_the_input_shows_at_each_target(tokenizer):
    ids = lm_study.windows(tokenizer, DOCS * 30, length=8)
    bert = lm_study.new_model("bert", len(tokenizer), seed=1).eval()
    m = lm_study.masked_lm_losses(bert, tokenizer, ids, seed=2)
    batch = lm_study.collate_for("bert", tokenizer)(list(ids), torch.Generator().manual_seed(2))  # the same draw
    selected = batch["labels"] != IGNORE_INDEX
    shown = batch["input_ids"][selected]
    assert torch.equal(m["label"], batch["labels"][selected]) and len(m["loss"]) == int(selected.sum())
    assert torch.all(shown[m["shown"] == 0] == tokenizer.mask_token_id)
    assert torch.all(shown[m["shown"] == 2] == m["label"][m["shown"] == 2])  # the answer is in the input
    assert torch.all((shown[m["shown"] == 1] != m["label"][m["shown"] == 1]) & (shown[m["shown"] == 1] != tokenizer.mask_token_id))
    share = torch.bincount(m["shown"], minlength=3).double() / len(m["shown"])
    assert 0.7 < share[0] < 0.9 and 0.03 < share[2] < 0.2  # about 80 / 10 / 10
    with torch.no_grad():
        logits = bert(batch["input_ids"]).mlm_logits[selected]
    torch.testing.assert_close(m["loss"], F.cross_entropy(logits, m["label"], reduction="none"))
    assert torch.equal(m["window"], selected.nonzero()[:, 0])


def test_fill_bigram_by_hand_and_in_the_hits(tokenizer):
    from bertedu.course.ngram import BigramLM

    ids = lm_study.windows(tokenizer, DOCS * 3, length=8)
    bigram = BigramLM.from_windows(ids, len(tokenizer))
    cloze = [("the river ran", "past", "the old mill ."), ("", "may", "the water rose .")]
    both, left = lm_study.fill_bigram(bigram, tokenizer, cloze), lm_study.fill_bigram(bigram, tokenizer, cloze, "left")
    special = sorted(tokenizer.special_ids)
    for k, (l_piece, r_piece) in enumerate([("ran", "the"), ("[CLS]", "the")]):
        l_id, r_id = tokenizer.vocab[l_piece], tokenizer.vocab[r_piece]
        for guess, scores in [(left, bigram.log_probs[l_id].clone()),
                              (both, bigram.log_probs[l_id] + bigram.log_probs[:, r_id])]:
            scores[special] = -math.inf
            assert int(guess[k]) == int(scores.argmax())
    with pytest.raises(ValueError, match="sides"):
        lm_study.fill_bigram(bigram, tokenizer, cloze, sides="right")
    models = {"bert": lm_study.new_model("bert", len(tokenizer)).eval(), "gpt": lm_study.new_model("gpt", len(tokenizer)).eval(),
              "elmo": small_elmo(len(tokenizer))}
    hits = lm_study.middle_word_hits(models, tokenizer, cloze, "the", bigram)
    assert list(hits)[-3:] == ["bigram, left piece", "bigram, both neighbours", "always 'the'"]
    assert torch.equal(hits["bigram, both neighbours"], both == torch.tensor([tokenizer.vocab["past"], tokenizer.vocab["may"]]))


@pytest.mark.slow
def test_the_sweep_script_records_every_rate_and_keeps_the_seeds(tmp_path):
    """benchmarks/elmo_study.py --sweep cut to 2 steps and two rates: every kind's measures per rate, the lowest
    chosen, the command recorded, and the record's other keys kept."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    record = tmp_path / "elmo.json"
    record.write_text(json.dumps({"by_seed": {"0": {}}}))
    script = Path(__file__).resolve().parent.parent / "benchmarks" / "elmo_study.py"
    proc = subprocess.run([sys.executable, str(script), "--sweep", "1e-3,1e-2", "--steps", "2", "--threads", "1",
                           "--json", str(record)], capture_output=True, text=True,
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    study = json.loads(record.read_text())
    assert study["by_seed"] == {"0": {}}  # untouched
    swept = study["lr_sweep"]
    assert swept["rates"] == [1e-3, 1e-2] and swept["steps"] == 2 and swept["validation_windows"] > 100
    for kind in lm_study.KINDS:
        scored = {float(lr): m[lm_study.SELECTED_BY[kind]] for lr, m in swept["losses"][kind].items()}
        assert swept["chosen"][kind] == min(scored, key=scored.get)
    assert swept["command"].startswith("python benchmarks/elmo_study.py --sweep 1e-3,1e-2 --steps 2")
    assert "| elmo | mean of both LMs' losses |" in proc.stdout
