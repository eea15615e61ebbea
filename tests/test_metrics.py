"""bertedu.training.metrics against scikit-learn, seqeval and hand-computed SQuAD scores."""

import random

import pytest
import torch

from bertedu.training.metrics import (
    accuracy,
    bio_entities,
    bootstrap_se,
    entity_counts,
    entity_micro_prf,
    entity_prf,
    exact_match,
    f1_score,
    normalize_answer,
    precision_recall_f1,
    squad_f1,
    squad_metrics,
    stray_inside_tags,
    tagging_errors,
)

seqeval_metrics = pytest.importorskip("seqeval.metrics")
from seqeval.metrics.sequence_labeling import get_entities  # noqa: E402

sk = pytest.importorskip("sklearn.metrics")

# ---------------------------------------------------------------------------------------
# Classification, against scikit-learn
# ---------------------------------------------------------------------------------------


def random_labels(n, classes, seed):
    rng = random.Random(seed)
    return [rng.randrange(classes) for _ in range(n)], [rng.randrange(classes) for _ in range(n)]


@pytest.mark.parametrize("seed", range(5))
def test_binary_scores_match_sklearn(seed):
    preds, labels = random_labels(57, 2, seed)
    assert accuracy(preds, labels) == pytest.approx(sk.accuracy_score(labels, preds))
    for pos in (0, 1):
        ours = precision_recall_f1(preds, labels, "binary", pos_label=pos)
        theirs = sk.precision_recall_fscore_support(labels, preds, average="binary", pos_label=pos)[:3]
        assert ours == pytest.approx(theirs)
    assert f1_score(preds, labels) == pytest.approx(sk.f1_score(labels, preds))


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("average", ["macro", "micro"])
def test_multiclass_scores_match_sklearn(seed, average):
    preds, labels = random_labels(80, 4, seed)
    preds = [p if p != 3 else 0 for p in preds]  # class 3 is never predicted: zero division
    ours = precision_recall_f1(preds, labels, average)
    theirs = sk.precision_recall_fscore_support(labels, preds, average=average, zero_division=0)[:3]
    assert ours == pytest.approx(theirs)
    expected = sk.f1_score(labels, preds, average=average, zero_division=0)
    assert f1_score(preds, labels, average) == pytest.approx(expected)


def test_classification_inputs_and_errors():
    preds, labels = torch.tensor([1, 0, 1, 1]), torch.tensor([1, 1, 0, 1])
    assert accuracy(preds, labels) == 0.5
    assert precision_recall_f1(preds, labels) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    assert f1_score([0, 0], [0, 0]) == 0.0  # no positives at all: 0, not a division error
    with pytest.raises(ValueError, match="same length"):
        accuracy([1, 0], [1])
    with pytest.raises(ValueError, match="binary"):
        f1_score([0, 1, 2], [0, 1, 2])
    with pytest.raises(ValueError, match="average"):
        f1_score([0, 1], [0, 1], average="weighted")


# ---------------------------------------------------------------------------------------
# Entities, against seqeval (default, conlleval-style mode)
# ---------------------------------------------------------------------------------------

TAGS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def random_tags(rng, n):
    """Mostly well-formed BIO, with stray I- tags and type changes mixed in."""
    tags, current = [], None
    for _ in range(n):
        r = rng.random()
        if r < 0.4:
            tags.append("O")
            current = None
        elif r < 0.65:
            current = rng.choice(["PER", "LOC", "ORG"])
            tags.append("B-" + current)
        elif r < 0.85 and current:
            tags.append("I-" + current)
        else:
            tags.append(rng.choice(TAGS))  # anything: stray I-, type change
    return tags


def perturb(rng, tags):
    return [rng.choice(TAGS) if rng.random() < 0.15 else t for t in tags]


@pytest.fixture(scope="module")
def tag_sample():
    rng = random.Random(2024)
    gold = [random_tags(rng, rng.randint(1, 25)) for _ in range(400)]
    pred = [perturb(rng, g) for g in gold]
    return gold, pred


def test_bio_entities_match_seqeval_on_every_sequence(tag_sample):
    gold, pred = tag_sample
    for seq in gold + pred:
        assert bio_entities(seq) == set(get_entities(seq)), seq


def test_entity_prf_matches_seqeval(tag_sample):
    gold, pred = tag_sample
    ours = entity_prf(gold, pred)
    assert 0.3 < ours["f1"] < 0.95  # a sample where the check means something
    assert ours["precision"] == pytest.approx(seqeval_metrics.precision_score(gold, pred))
    assert ours["recall"] == pytest.approx(seqeval_metrics.recall_score(gold, pred))
    assert ours["f1"] == pytest.approx(seqeval_metrics.f1_score(gold, pred))
    report = seqeval_metrics.classification_report(gold, pred, output_dict=True)
    assert set(ours["per_type"]) == {"PER", "LOC", "ORG"}
    for kind, scores in ours["per_type"].items():
        for key in ("precision", "recall", "f1"):
            assert scores[key] == pytest.approx(report[kind][key if key != "f1" else "f1-score"])
        assert scores["support"] == report[kind]["support"]


@pytest.mark.parametrize(
    "tags, expected",
    [
        (["B-PER", "I-PER", "O", "B-LOC"], {("PER", 0, 1), ("LOC", 3, 3)}),  # entity at the end
        (["I-PER", "I-PER", "O"], {("PER", 0, 1)}),  # stray I- starts an entity
        (["O", "I-MISC"], {("MISC", 1, 1)}),
        (["B-PER", "I-LOC", "I-LOC"], {("PER", 0, 0), ("LOC", 1, 2)}),  # type change
        (["B-PER", "B-PER"], {("PER", 0, 0), ("PER", 1, 1)}),  # B after B: two entities
        (["O", "O"], set()),
        ([], set()),
    ],
)
def test_bio_entities_hand_written(tags, expected):
    assert bio_entities(tags) == expected
    assert bio_entities(tags) == set(get_entities(tags))


def test_entity_counts_resampled_give_entity_prf_of_the_resample_exactly(tag_sample):
    gold, pred = tag_sample
    counts = entity_counts(gold, pred)
    assert [c[:2] for c in counts[:3]] == [(len(bio_entities(g)), len(bio_entities(p))) for g, p in zip(gold, pred)][:3]
    rng = random.Random(0)
    for _ in range(20):  # resamples with repeats, as a bootstrap draws them
        idx = [rng.randrange(len(gold)) for _ in range(len(gold))]
        full = entity_prf([gold[i] for i in idx], [pred[i] for i in idx])
        assert entity_micro_prf(counts[i] for i in idx) == {k: full[k] for k in ("precision", "recall", "f1")}
    assert entity_micro_prf([]) == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    with pytest.raises(ValueError, match="they must align"):
        entity_counts([["B-PER", "O"]], [["B-PER"]])


def test_a_bootstrap_over_counts_is_the_bootstrap_over_tags(tag_sample):
    gold, pred = tag_sample[0][:60], tag_sample[1][:60]
    counts = entity_counts(gold, pred)
    slow = bootstrap_se(lambda idx: entity_prf([gold[i] for i in idx], [pred[i] for i in idx])["f1"], 60, samples=50)
    fast = bootstrap_se(lambda idx: entity_micro_prf(counts[i] for i in idx)["f1"], 60, samples=50)
    assert slow == fast > 0


def test_entity_prf_hand_written():
    gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
    pred = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "B-LOC"]]
    # gold: PER(0,0-1) LOC(0,3) ORG(1,0); pred: PER(0,0-1) ORG(0,3) ORG(1,0) LOC(1,1)
    out = entity_prf(gold, pred)
    assert out["precision"] == pytest.approx(2 / 4)
    assert out["recall"] == pytest.approx(2 / 3)
    assert out["f1"] == pytest.approx(2 * (1 / 2) * (2 / 3) / (1 / 2 + 2 / 3))
    assert out["per_type"]["LOC"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1}
    assert out["per_type"]["ORG"]["precision"] == 0.5 and out["per_type"]["ORG"]["recall"] == 1.0
    assert entity_prf(["B-PER", "O"], ["B-PER", "O"])["f1"] == 1.0  # one flat sequence is fine


def test_entity_errors():
    with pytest.raises(ValueError, match="not a BIO tag"):
        bio_entities(["B-PER", "PER"])
    with pytest.raises(ValueError, match="sequence 1"):
        entity_prf([["O"], ["O", "O"]], [["O"], ["O"]])


def test_stray_inside_tags_hand_written():
    assert stray_inside_tags(["O", "I-PER", "I-PER", "B-LOC", "I-PER"]) == 2  # after O; after B-LOC
    assert stray_inside_tags(["I-LOC"]) == 1  # first: an O comes before
    assert stray_inside_tags(["B-PER", "I-PER", "I-PER", "O", "B-LOC", "I-LOC"]) == 0
    assert stray_inside_tags(["B-LOC", "I-LOC", "I-PER"]) == 1  # a change of type inside
    assert stray_inside_tags(["B", "I", "O", "I"]) == 1  # untyped tags follow the same rule


def test_tagging_errors_sort_every_wrong_entity_into_one_kind():
    gold = [["B-PER", "I-PER", "I-PER", "O", "B-LOC", "O", "O", "B-ORG"]]
    pred = [["B-PER", "I-PER", "O", "O", "B-ORG", "O", "B-LOC", "I-ORG"]]
    # gold PER 0-2, LOC 4, ORG 7; pred PER 0-1 (cut short: boundary), ORG 4 (a gold span, wrong type),
    # LOC 6 (touches nothing: spurious), ORG 7 (the stray I-ORG after B-LOC opens it: correct)
    assert tagging_errors(gold, pred) == {
        "invalid_sequences": 1, "stray_inside_tags": 1, "predicted_entities": 4, "type_errors": 1,
        "boundary_errors": 1, "spurious_entities": 1, "missed_entities": 0}
    # one entity found where gold has two: a boundary error; a gold entity nothing touches is missed
    assert tagging_errors([["B-LOC", "B-LOC", "O", "B-PER"]], [["B-LOC", "I-LOC", "O", "O"]]) == {
        "invalid_sequences": 0, "stray_inside_tags": 0, "predicted_entities": 1, "type_errors": 0,
        "boundary_errors": 1, "spurious_entities": 0, "missed_entities": 1}


def test_tagging_errors_add_up_on_random_sequences():
    """correct + type + boundary + spurious = every predicted entity, whatever the tags."""
    rng = random.Random(0)
    tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC"]
    gold = [[rng.choice(tags) for _ in range(rng.randint(1, 12))] for _ in range(200)]
    pred = [[rng.choice(tags) for _ in g] for g in gold]
    errors = tagging_errors(gold, pred)
    correct = sum(len(bio_entities(g) & bio_entities(p)) for g, p in zip(gold, pred))
    assert correct + errors["type_errors"] + errors["boundary_errors"] + errors["spurious_entities"] \
        == errors["predicted_entities"] == sum(len(bio_entities(p)) for p in pred)
    assert errors["invalid_sequences"] == sum(stray_inside_tags(p) > 0 for p in pred) > 0
    assert min(errors.values()) > 0  # every kind occurs in 200 random sequences


# ---------------------------------------------------------------------------------------
# SQuAD exact match and F1
# ---------------------------------------------------------------------------------------


def test_normalize_answer():
    assert normalize_answer("The Eiffel  Tower!") == "eiffel tower"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theatre") == "theatre"  # "the" only as a whole word


def test_exact_match():
    assert exact_match("the Eiffel Tower", ["Eiffel tower"]) == 1.0
    assert exact_match("Eiffel Tower in Paris", ["Eiffel tower"]) == 0.0
    assert exact_match("1998", ["in 1998", "1998."]) == 1.0  # best over golds
    assert exact_match("Paris", "paris") == 1.0  # one gold as a string
    assert exact_match("Paris", [{"text": "Paris", "answer_start": 3}]) == 1.0  # SQuAD answer dicts


def test_squad_f1_partial_overlap():
    # pred tokens: tall eiffel tower (3); gold: eiffel tower in paris (4); shared 2
    p, r = 2 / 3, 2 / 4
    assert squad_f1("the tall Eiffel Tower", ["Eiffel Tower in Paris"]) == pytest.approx(2 * p * r / (p + r))
    assert squad_f1("the tall Eiffel Tower", ["Eiffel Tower in Paris", "tall tower"]) == pytest.approx(0.8)
    assert squad_f1("London", ["Paris"]) == 0.0
    assert squad_f1("paris paris", ["paris"]) == pytest.approx(2 * 0.5 * 1 / 1.5)  # counts multiplicity
    assert squad_f1("the", ["a"]) == 1.0  # both normalise to nothing


def test_squad_metrics():
    golds = {"q1": ["Eiffel Tower"], "q2": ["1998", "in 1998"], "q3": ["Zoë"]}
    preds = {"q1": "the Eiffel Tower", "q2": "1998 or 1999", "q3": "Zoe"}
    f1_q2 = 2 * (1 / 3) * 1 / (1 / 3 + 1)
    out = squad_metrics(preds, golds)
    assert out["exact_match"] == pytest.approx(100 / 3)
    assert out["f1"] == pytest.approx(100 * (1 + f1_q2 + 0) / 3)
    with pytest.warns(UserWarning, match="no prediction"):
        out = squad_metrics({"q1": "Eiffel Tower"}, golds)
    assert out["exact_match"] == pytest.approx(100 / 3)


def test_bootstrap_se_of_a_mean_is_the_textbook_standard_error():
    from bertedu.training.metrics import bootstrap_se

    rng = random.Random(1)
    correct = [rng.random() < 0.7 for _ in range(400)]  # 400 right/wrong answers
    p = sum(correct) / len(correct)
    se = bootstrap_se(lambda idx: sum(correct[i] for i in idx) / len(idx), len(correct), samples=2000)
    assert se == pytest.approx((p * (1 - p) / len(correct)) ** 0.5, rel=0.1)  # sqrt(p(1-p)/n)
    assert se == bootstrap_se(lambda idx: sum(correct[i] for i in idx) / len(idx), len(correct), samples=2000)
    same = bootstrap_se(lambda idx: 0.0, 10)  # a statistic that never varies
    assert same == 0.0
    with pytest.raises(ValueError):
        bootstrap_se(lambda idx: 0.0, 0)
