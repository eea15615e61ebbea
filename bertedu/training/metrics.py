"""Evaluation metrics for the fine-tuning tasks. Introduced in the fine-tuning notebooks.

- Classification: `accuracy`, `precision_recall_f1` / `f1_score` (binary, macro, micro),
  computed as scikit-learn computes them (a test checks that they agree).
- Tagging: entity-level precision / recall / F1 for BIO tags (`bio_entities`,
  `entity_prf`), as `seqeval` computes them in its default (conlleval) mode: an entity
  counts only when its type, its first token and its last token all match; and what goes
  wrong (`stray_inside_tags`, `tagging_errors`): invalid BIO, and wrong entities sorted
  into type, boundary and spurious errors; `entity_counts` / `entity_micro_prf` for a quick
  bootstrap over sentences.
- Extractive QA: SQuAD exact match and token-overlap F1 after the official answer
  normalisation (`normalize_answer`, `exact_match`, `squad_f1`, `squad_metrics`).
- Noise: `bootstrap_se`, the standard error of any score over a test set, for telling a
  difference between two models from the luck of which examples were drawn.

Classification and tagging metrics are fractions in [0, 1]; SQuAD metrics are
percentages, as the official evaluation script prints them. A score whose denominator
is zero (no predicted positives, say) is 0.0, scikit-learn's and seqeval's default.
"""

from __future__ import annotations

import re
import string
import warnings
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

# ----------------------------------------------------------------------------------------
# Classification
# ----------------------------------------------------------------------------------------


def _as_list(values) -> list:
    """A tensor, NumPy array or sequence of labels -> a flat Python list."""
    if hasattr(values, "tolist"):
        values = values.tolist()
    values = list(values)
    if any(isinstance(v, (list, tuple)) for v in values):
        raise ValueError("expected a flat sequence of labels (one per example), got a nested one")
    return values


def _paired(preds, labels) -> tuple[list, list]:
    preds, labels = _as_list(preds), _as_list(labels)
    if len(preds) != len(labels):
        raise ValueError(f"preds ({len(preds)}) and labels ({len(labels)}) must have the same length")
    if not preds:
        raise ValueError("no examples: preds and labels are empty")
    return preds, labels


def _ratio(num: float, den: float) -> float:
    return num / den if den else 0.0


def _f1(precision: float, recall: float) -> float:
    return _ratio(2 * precision * recall, precision + recall)


def accuracy(preds, labels) -> float:
    """The fraction of examples whose prediction equals the label."""
    preds, labels = _paired(preds, labels)
    return sum(p == y for p, y in zip(preds, labels)) / len(labels)


def precision_recall_f1(preds, labels, average: str = "binary", pos_label=1) -> tuple[float, float, float]:
    """(precision, recall, F1) of class predictions, as scikit-learn defines them.

    average="binary": of the class `pos_label` only (at most two classes allowed).
    average="macro": the unweighted mean over every class seen in `labels` or `preds`
        of each class's precision, recall and F1 (F1 is averaged, not recomputed).
    average="micro": true/false positives summed over classes first; with one label per
        example this equals accuracy for all three numbers.
    """
    preds, labels = _paired(preds, labels)
    classes = sorted(set(labels) | set(preds))
    tp = Counter(y for p, y in zip(preds, labels) if p == y)
    n_pred, n_true = Counter(preds), Counter(labels)

    def per_class(c) -> tuple[float, float, float]:
        p, r = _ratio(tp[c], n_pred[c]), _ratio(tp[c], n_true[c])
        return p, r, _f1(p, r)

    if average == "binary":
        if len(classes) > 2:
            raise ValueError(
                f"average='binary' needs at most two classes, found {len(classes)} "
                f"({classes[:6]}...); use average='macro' or 'micro'"
            )
        return per_class(pos_label)
    if average == "macro":
        scores = [per_class(c) for c in classes]
        return tuple(sum(s[i] for s in scores) / len(scores) for i in range(3))  # type: ignore[return-value]
    if average == "micro":
        total_tp = sum(tp.values())
        p, r = _ratio(total_tp, len(preds)), _ratio(total_tp, len(labels))
        return p, r, _f1(p, r)
    raise ValueError(f"unknown average {average!r}; choose 'binary', 'macro' or 'micro'")


def f1_score(preds, labels, average: str = "binary", pos_label=1) -> float:
    """F1 of class predictions (see `precision_recall_f1` for `average`). The default,
    binary F1 of the class `pos_label` (2PR / (P + R)), is what MRPC reports."""
    return precision_recall_f1(preds, labels, average, pos_label)[2]


# ----------------------------------------------------------------------------------------
# Tagging: entities from BIO tags
# ----------------------------------------------------------------------------------------

OUTSIDE = "O"
_PREFIXES = ("B", "I", "E", "S")  # begin, inside; end and single for BIOES tags


def _split_tag(tag: str) -> tuple[str, str]:
    """"B-PER" -> ("B", "PER"); "O" -> ("O", ""). Raises on anything else."""
    if tag == OUTSIDE:
        return OUTSIDE, ""
    if tag in _PREFIXES:  # a bare "B" / "I": an entity without a type
        return tag, ""
    prefix, sep, kind = tag.partition("-")
    if not sep or prefix not in _PREFIXES or not kind:
        raise ValueError(f"tag {tag!r} is not a BIO tag: expected 'O', 'B-TYPE' or 'I-TYPE' (or 'E-'/'S-' for BIOES)")
    return prefix, kind


def bio_entities(tags: Sequence[str]) -> set[tuple[str, int, int]]:
    """The entities in one tag sequence, as a set of (type, start, end), end inclusive.

    `["B-PER", "I-PER", "O", "B-LOC"]` -> `{("PER", 0, 1), ("LOC", 3, 3)}`.

    Ill-formed sequences are read as conlleval (and `seqeval`'s default mode) reads them:
    a stray I- (after O, or after an entity of another type) starts a new entity, and a
    change of type ends the current one. E-/S- (BIOES) tags are read the same way.
    """
    entities = set()
    prev_prefix, prev_kind, start = OUTSIDE, "", 0
    # One "O" past the end closes an entity that runs to the last token.
    for i, tag in enumerate([*tags, OUTSIDE]):
        prefix, kind = _split_tag(tag)
        inside_before = prev_prefix != OUTSIDE
        # An entity ends before token i when the previous token was its last one (E, S),
        # when B/I is followed by a token that cannot continue it (B, S, O), or when the
        # type changes.
        ends = (
            prev_prefix in ("E", "S")
            or (prev_prefix in ("B", "I") and prefix in ("B", "S", OUTSIDE))
            or (inside_before and prev_kind != kind)
        )
        # An entity starts at token i on B or S; on I or E that follows no open entity
        # (the stray I- rule); or on any entity tag whose type differs from the previous.
        starts = (
            prefix in ("B", "S")
            or (prefix in ("I", "E") and prev_prefix in (OUTSIDE, "E", "S"))
            or (prefix != OUTSIDE and prev_kind != kind)
        )
        if ends:
            entities.add((prev_kind, start, i - 1))
        if starts:
            start = i
        prev_prefix, prev_kind = prefix, kind
    return entities


def _as_sequences(seqs) -> list[list[str]]:
    seqs = list(seqs)
    if seqs and isinstance(seqs[0], str):
        return [seqs]  # one flat sequence of tags
    return [list(s) for s in seqs]


def _entity_sets(true_seqs, pred_seqs) -> list[tuple[set, set]]:
    """Per aligned sequence pair, (gold entities, predicted entities) as `bio_entities` sets."""
    true_seqs, pred_seqs = _as_sequences(true_seqs), _as_sequences(pred_seqs)
    if len(true_seqs) != len(pred_seqs):
        raise ValueError(f"{len(true_seqs)} gold sequences but {len(pred_seqs)} predicted ones")
    for n, (t, p) in enumerate(zip(true_seqs, pred_seqs)):
        if len(t) != len(p):
            raise ValueError(f"sequence {n}: {len(t)} gold tags but {len(p)} predicted tags; they must align")
    return [(bio_entities(t), bio_entities(p)) for t, p in zip(true_seqs, pred_seqs)]


def entity_prf(true_seqs, pred_seqs) -> dict:
    """Entity-level precision, recall and F1 over tag sequences (a list of lists of tags).

    A predicted entity is correct only when the same (type, start, end) is in the gold
    sequence. Totals are micro-averaged over types (seqeval's default), and `per_type`
    gives {type: {"precision", "recall", "f1", "support"}} with support = gold count.

    Returns {"precision", "recall", "f1", "per_type"}; fractions in [0, 1].
    """
    gold: set = set()
    pred: set = set()
    for n, (g, p) in enumerate(_entity_sets(true_seqs, pred_seqs)):
        gold |= {(n, *e) for e in g}  # (sequence, type, start, end)
        pred |= {(n, *e) for e in p}
    correct = gold & pred

    def scores(g: set, p: set, c: set) -> dict:
        precision, recall = _ratio(len(c), len(p)), _ratio(len(c), len(g))
        return {"precision": precision, "recall": recall, "f1": _f1(precision, recall), "support": len(g)}

    per_type = {}
    for kind in sorted({e[1] for e in gold | pred}):
        pick = lambda s: {e for e in s if e[1] == kind}  # noqa: E731
        per_type[kind] = scores(pick(gold), pick(pred), pick(correct))
    total = scores(gold, pred, correct)
    return {"precision": total["precision"], "recall": total["recall"], "f1": total["f1"], "per_type": per_type}


def entity_counts(true_seqs, pred_seqs) -> list[tuple[int, int, int]]:
    """Per sequence, (gold entities, predicted entities, correct ones): the counts that
    `entity_prf` adds up. A bootstrap over sentences resamples these instead of re-reading
    the tags: `entity_micro_prf` of a resample's counts is `entity_prf` of its tags, exactly."""
    return [(len(gold), len(pred), len(gold & pred)) for gold, pred in _entity_sets(true_seqs, pred_seqs)]


def entity_micro_prf(counts: Iterable[tuple[int, int, int]]) -> dict:
    """{"precision", "recall", "f1"} from `entity_counts` (of some sequences, repeats allowed)."""
    gold = pred = correct = 0
    for g, p, c in counts:
        gold, pred, correct = gold + g, pred + p, correct + c
    precision, recall = _ratio(correct, pred), _ratio(correct, gold)
    return {"precision": precision, "recall": recall, "f1": _f1(precision, recall)}


def stray_inside_tags(tags: Sequence[str]) -> int:
    """The tags of one sequence that break BIO: an I-X (or a BIOES E-X) whose previous tag is
    neither B-X nor I-X; before the first tag there is an O. `["O", "I-PER", "I-PER",
    "B-LOC", "I-PER"]` -> 2 (the first I-PER, after O; the last, after B-LOC). A softmax head
    can write these; a CRF decoded under BIO constraints cannot (bertedu.model.crf)."""
    stray, previous = 0, (OUTSIDE, "")
    for tag in tags:
        prefix, kind = _split_tag(tag)
        if prefix in ("I", "E") and not (previous[0] in ("B", "I") and previous[1] == kind):
            stray += 1
        previous = (prefix, kind)
    return stray


def tagging_errors(true_seqs, pred_seqs) -> dict[str, int]:
    """Counts of what goes wrong in predicted tag sequences against the gold ones:

        invalid_sequences   predicted sequences with at least one stray I- tag (`stray_inside_tags`)
        stray_inside_tags   the stray I- tags in all predicted sequences
        predicted_entities  every predicted entity (read as `bio_entities` reads it: a stray
                            I- opens an entity), of which the wrong ones are exactly one of:
        type_errors         the span (first and last word) of a gold entity, another type
        boundary_errors     overlapping at least one gold entity (of any type), but the span
                            of none: a name cut short, run on, or split
        spurious_entities   overlapping no gold entity at all
        missed_entities     gold entities that no predicted entity overlaps

    So predicted_entities = correct + type_errors + boundary_errors + spurious_entities, and
    type_errors + boundary_errors are the wrong predictions that "touch" a gold entity
    (notebook 09's error analysis).
    """
    true_seqs, pred_seqs = _as_sequences(true_seqs), _as_sequences(pred_seqs)
    if len(true_seqs) != len(pred_seqs):
        raise ValueError(f"{len(true_seqs)} gold sequences but {len(pred_seqs)} predicted ones")
    counts = dict.fromkeys(("invalid_sequences", "stray_inside_tags", "predicted_entities", "type_errors",
                            "boundary_errors", "spurious_entities", "missed_entities"), 0)
    for true, pred in zip(true_seqs, pred_seqs):
        stray = stray_inside_tags(pred)
        counts["invalid_sequences"] += stray > 0
        counts["stray_inside_tags"] += stray
        gold, found = bio_entities(true), bio_entities(pred)
        gold_spans = {(a, b) for _, a, b in gold}
        overlaps = lambda a, b, entities: any(a <= b2 and a2 <= b for _, a2, b2 in entities)  # noqa: E731
        counts["predicted_entities"] += len(found)
        for kind, a, b in found - gold:
            if (a, b) in gold_spans:
                counts["type_errors"] += 1
            elif overlaps(a, b, gold):
                counts["boundary_errors"] += 1
            else:
                counts["spurious_entities"] += 1
        counts["missed_entities"] += sum(not overlaps(a, b, found) for _, a, b in gold)
    return counts


# ----------------------------------------------------------------------------------------
# Extractive QA: SQuAD v1.1 exact match and F1
# ----------------------------------------------------------------------------------------

_PUNCTUATION = set(string.punctuation)
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalize_answer(text: str) -> str:
    """The official SQuAD normalisation: lower-case, drop punctuation, drop the articles
    a/an/the, collapse whitespace. "The Eiffel  Tower!" -> "eiffel tower"."""
    text = text.lower()
    text = "".join(ch for ch in text if ch not in _PUNCTUATION)  # ASCII punctuation only, as the script
    text = _ARTICLES.sub(" ", text)
    return " ".join(text.split())


def _golds(gold_list) -> list[str]:
    if isinstance(gold_list, str):
        return [gold_list]
    golds = [g["text"] if isinstance(g, Mapping) else g for g in gold_list]  # SQuAD answer dicts too
    if not golds:
        raise ValueError("no gold answers given: SQuAD scores a prediction against at least one")
    return golds


def _token_f1(pred: str, gold: str) -> float:
    pred_tokens, gold_tokens = normalize_answer(pred).split(), normalize_answer(gold).split()
    if not pred_tokens or not gold_tokens:
        # v1.1's script gives 0 here even when both are empty; v2.0's rule (1 only if
        # both are empty) keeps F1 consistent with exact match.
        return float(pred_tokens == gold_tokens)
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())  # shared tokens, with multiplicity
    if same == 0:
        return 0.0
    precision, recall = same / len(pred_tokens), same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def exact_match(pred: str, gold_list) -> float:
    """1.0 if the normalised prediction equals any normalised gold answer, else 0.0."""
    return max(float(normalize_answer(pred) == normalize_answer(g)) for g in _golds(gold_list))


def squad_f1(pred: str, gold_list) -> float:
    """Token-overlap F1 of the normalised answers, the best over the gold answers."""
    return max(_token_f1(pred, g) for g in _golds(gold_list))


def squad_metrics(preds: Mapping[str, str], golds: Mapping[str, Iterable]) -> dict[str, float]:
    """{"exact_match": %, "f1": %} over every question in `golds` (id -> gold answers).

    As in the official script, a question with no prediction scores 0 (with a warning);
    predictions for ids not in `golds` are ignored.
    """
    if not golds:
        raise ValueError("golds is empty: nothing to evaluate")
    missing = [qid for qid in golds if qid not in preds]
    if missing:
        warnings.warn(f"{len(missing)} of {len(golds)} questions have no prediction and score 0 (e.g. {missing[0]!r})")
    em = f1 = 0.0
    for qid, answers in golds.items():
        if qid in preds:
            em += exact_match(preds[qid], answers)
            f1 += squad_f1(preds[qid], answers)
    return {"exact_match": 100.0 * em / len(golds), "f1": 100.0 * f1 / len(golds)}


# ---- SQuAD 2.0: unanswerable questions ---------------------------------------------------
def _v2_golds(answers) -> list[str]:
    """v2.0's gold list: the answers whose normalised text is not empty, or [""] for an
    unanswerable question (so only the empty prediction matches it)."""
    texts = [answers] if isinstance(answers, str) else [a["text"] if isinstance(a, Mapping) else a for a in answers]
    return [t for t in texts if normalize_answer(t)] or [""]


def squad_v2_metrics(preds: Mapping[str, str], golds: Mapping[str, Iterable]) -> dict[str, float]:
    """SQuAD 2.0's official metric over every question in `golds` (id -> gold answers, an
    empty list for an unanswerable one). Percentages:

        exact_match, f1                  all questions
        has_ans_exact_match, has_ans_f1  the answerable ones (HasAns)
        no_ans_exact_match, no_ans_f1    the unanswerable ones (NoAns): 100 for "", else 0
    and the counts has_ans_total, no_ans_total. A prediction of "" means "no answer"; an
    unanswerable question scores 1 only for it, an answerable one 0 for it (F1 and EM).
    """
    if not golds:
        raise ValueError("golds is empty: nothing to evaluate")
    missing = [qid for qid in golds if qid not in preds]
    if missing:
        warnings.warn(f"{len(missing)} of {len(golds)} questions have no prediction and score 0 (e.g. {missing[0]!r})")
    sums = {"": [0.0, 0.0, 0], "has_ans_": [0.0, 0.0, 0], "no_ans_": [0.0, 0.0, 0]}
    for qid, answers in golds.items():
        gold = _v2_golds(answers)
        em = max(float(normalize_answer(preds[qid]) == normalize_answer(g)) for g in gold) if qid in preds else 0.0
        f1 = max(_token_f1(preds[qid], g) for g in gold) if qid in preds else 0.0
        has_answer = bool([answers] if isinstance(answers, str) else list(answers))  # as the official script
        for key in ("", "has_ans_" if has_answer else "no_ans_"):
            sums[key][0] += em
            sums[key][1] += f1
            sums[key][2] += 1
    result = {}
    for key, (em, f1, n) in sums.items():
        if n:
            result[f"{key}exact_match"], result[f"{key}f1"] = 100.0 * em / n, 100.0 * f1 / n
    result["has_ans_total"], result["no_ans_total"] = sums["has_ans_"][2], sums["no_ans_"][2]
    return result


def best_null_threshold(span_preds: Mapping[str, str], golds: Mapping[str, Iterable],
                        null_margins: Mapping[str, float], metric: str = "f1") -> tuple[float, float]:
    """(threshold, best score %) for SQuAD 2.0's "no answer" decision, as the official
    evaluation's find_best_thresh: a question is answered "" when its null margin
    (null score - best span score) is above the threshold. Starting from "all unanswered",
    questions are answered in order of increasing margin; the threshold is the margin at
    which the total `metric` ("f1" or "exact_match") of the best non-null answers
    `span_preds` peaks (ties: the lowest such margin, as the official script)."""
    score = _token_f1 if metric == "f1" else (lambda p, g: float(normalize_answer(p) == normalize_answer(g)))
    has_answer = {qid: bool(list(answers)) for qid, answers in golds.items()}
    current = best = float(sum(not h for h in has_answer.values()))  # everything predicted ""
    # The official script starts from 0.0 here, which need not mean "everything ''"; below the
    # smallest margin does, so the threshold returned always gives the score returned.
    threshold = min(null_margins[q] for q in golds) - 1.0
    for qid in sorted(golds, key=lambda q: null_margins[q]):
        if has_answer[qid]:
            current += max(score(span_preds[qid], g) for g in _v2_golds(golds[qid]))
        elif span_preds[qid]:
            current -= 1  # an unanswerable question that now gets an answer loses its point
        if current > best:
            best, threshold = current, null_margins[qid]
    return threshold, 100.0 * best / len(golds)


def bootstrap_se(statistic, n: int, samples: int = 1000, seed: int = 0) -> float:
    """Bootstrap standard error of `statistic(indices)` over a test set of `n` examples: the
    sample standard deviation of the statistic over `samples` resamples of the indices
    0..n-1, drawn with replacement (Efron and Tibshirani 1993, ch. 6). Seeded: the same
    call gives the same number.

    For a difference between two models scored on the same examples, pass the difference
    (a paired bootstrap): `lambda idx: score(a, idx) - score(b, idx)`.
    """
    import random
    import statistics

    if n < 1 or samples < 2:
        raise ValueError(f"bootstrap_se needs at least one example and two resamples, got n={n}, samples={samples}")
    rng = random.Random(seed)
    values = [statistic([rng.randrange(n) for _ in range(n)]) for _ in range(samples)]
    return statistics.stdev(values)
