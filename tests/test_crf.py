"""The linear-chain CRF (bertedu.model.crf) against pytorch-crf and against brute force, and
the CRF tagging head (BertForTokenClassification(head="crf")).

pytorch-crf (`torchcrf.CRF`, batch_first=True) is an independent implementation with the same
parameters (start_transitions, end_transitions, transitions [from, to]); both get the same
values, emissions and masks, and must agree: log-likelihoods within 1e-5 and the same Viterbi
paths, on ragged batches. `hypothesis` draws the shapes, lengths and scores.
"""

import atexit
import itertools
import shutil
import tempfile

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.configuration import set_hypothesis_home_dir

from bertedu import BertConfig
from bertedu.model.constants import IGNORE_INDEX
from bertedu.model.crf import LinearChainCRF, bio_allowed, pack_positions, unpack_positions
from bertedu.model.tasks import BertForTokenClassification

torchcrf = pytest.importorskip("torchcrf", reason="pytorch-crf is in the course extra: pip install pytorch-crf")

_HOME = tempfile.mkdtemp(prefix="bertedu-hypothesis-")  # no .hypothesis/ folder in the checkout
atexit.register(shutil.rmtree, _HOME, ignore_errors=True)
set_hypothesis_home_dir(_HOME)
CRF_SETTINGS = settings(max_examples=60, deadline=None, database=None, suppress_health_check=[HealthCheck.too_slow])

LABELS = ["O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-ORG", "I-ORG"]


def _is_valid_bio(path: list[int], names: list[str]) -> bool:
    """No I-X after anything but B-X or I-X, none first (the rule written out once more, by hand)."""
    previous = "O"
    for tag in (names[i] for i in path):
        if tag.startswith("I-") and previous not in ("B-" + tag[2:], tag):
            return False
        previous = tag
    return True


def _pair(num_tags: int, seed: int, label_names=None, scale: float = 1.0):
    """Our CRF and torchcrf's with the same random parameters."""
    g = torch.Generator().manual_seed(seed)
    ours = LinearChainCRF(num_tags, label_names)
    theirs = torchcrf.CRF(num_tags, batch_first=True)
    with torch.no_grad():
        for name in ("start_transitions", "end_transitions", "transitions"):
            value = torch.randn(getattr(ours, name).shape, generator=g) * scale
            getattr(ours, name).copy_(value)
            getattr(theirs, name).copy_(value)
    return ours, theirs


def _ragged(lengths: list[int], num_tags: int, seed: int, scale: float = 1.0):
    """Emissions (B, W, C), random tags (B, W) and the mask (B, W) of sentences of these lengths."""
    g = torch.Generator().manual_seed(seed)
    B, W = len(lengths), max(lengths)
    emissions = torch.randn(B, W, num_tags, generator=g) * scale
    tags = torch.randint(num_tags, (B, W), generator=g)
    mask = torch.arange(W) < torch.tensor(lengths).unsqueeze(1)  # padding after each row's words
    return emissions, tags, mask


ragged_lengths = st.lists(st.integers(1, 12), min_size=1, max_size=6)


@CRF_SETTINGS
@given(lengths=ragged_lengths, num_tags=st.integers(1, 9), seed=st.integers(0, 2**16))
def test_log_likelihood_and_viterbi_match_pytorch_crf_on_ragged_batches(lengths, num_tags, seed):
    ours, theirs = _pair(num_tags, seed)
    emissions, tags, mask = _ragged(lengths, num_tags, seed + 1, scale=2.0)
    expected = theirs(emissions, tags, mask, reduction="none")  # (B,) log-likelihoods
    torch.testing.assert_close(ours.log_likelihood(emissions, tags, mask), expected, atol=1e-5, rtol=0)
    assert ours.decode(emissions, mask, constrained=False) == theirs.decode(emissions, mask)
    assert [len(p) for p in ours.decode(emissions, mask)] == lengths
    # the loss is torchcrf's token_mean, negated
    torch.testing.assert_close(ours(emissions, tags, mask), -theirs(emissions, tags, mask, reduction="token_mean"),
                               atol=1e-5, rtol=0)


def test_a_full_batch_and_the_gradients_match_pytorch_crf():
    ours, theirs = _pair(5, seed=3)
    emissions, tags, mask = _ragged([7, 7, 7], 5, seed=4)
    e1, e2 = emissions.clone().requires_grad_(), emissions.clone().requires_grad_()
    ours.log_likelihood(e1, tags, mask).sum().backward()
    theirs(e2, tags, mask, reduction="sum").backward()
    torch.testing.assert_close(e1.grad, e2.grad, atol=1e-5, rtol=0)
    for name in ("start_transitions", "end_transitions", "transitions"):
        torch.testing.assert_close(getattr(ours, name).grad, getattr(theirs, name).grad, atol=1e-5, rtol=0)


def test_constrained_viterbi_matches_pytorch_crf_given_the_forbidden_transitions():
    """torchcrf has no constraints; given our masks as a large negative score in its parameters,
    it must find our constrained paths."""
    C = len(LABELS)
    ours, theirs = _pair(C, seed=5, label_names=LABELS)
    start_ok, transition_ok = bio_allowed(LABELS)
    with torch.no_grad():
        theirs.start_transitions.masked_fill_(~start_ok, -1e4)
        theirs.transitions.masked_fill_(~transition_ok, -1e4)
    emissions, _, mask = _ragged([10, 3, 1, 8, 12], C, seed=6, scale=3.0)
    assert ours.decode(emissions, mask) == theirs.decode(emissions, mask)
    assert ours.decode(emissions, mask) != ours.decode(emissions, mask, constrained=False)  # they did bite here


def test_bio_allowed_written_out():
    start, transitions = bio_allowed(["O", "B-PER", "I-PER", "B-LOC", "I-LOC"])
    assert start.tolist() == [True, True, False, True, False]
    assert transitions.tolist() == [  # [from][to]
        [True, True, False, True, False],  # O -> I-X never
        [True, True, True, True, False],  # B-PER -> I-PER only
        [True, True, True, True, False],  # I-PER -> I-PER only
        [True, True, False, True, True],
        [True, True, False, True, True],
    ]
    # labels outside the BIO scheme (part-of-speech tags) are left free
    start, transitions = bio_allowed(["NN", "VB", "DT"])
    assert start.all() and transitions.all()


@CRF_SETTINGS
@given(lengths=ragged_lengths, seed=st.integers(0, 2**16), scale=st.floats(0.1, 20.0))
def test_constrained_decoding_never_writes_an_invalid_bio_sequence(lengths, seed, scale):
    """Whatever the scores (here drawn so that invalid transitions often score highest), the
    constrained Viterbi path is valid BIO."""
    crf, _ = _pair(len(LABELS), seed, label_names=LABELS, scale=scale)
    emissions, _, mask = _ragged(lengths, len(LABELS), seed + 1, scale=scale)
    for path in crf.decode(emissions, mask):
        assert _is_valid_bio(path, LABELS), [LABELS[i] for i in path]


@torch.no_grad()
def test_brute_force_over_every_path_of_a_small_case():
    """3 tags, 4 words: all 81 sequences scored one by one. log Z is the logsumexp of their
    scores, Viterbi their argmax, and the constrained Viterbi the argmax over the valid ones."""
    names = ["O", "B-X", "I-X"]
    crf, _ = _pair(3, seed=7, label_names=names, scale=2.0)
    emissions, _, _ = _ragged([4], 3, seed=8, scale=2.0)
    paths = [list(p) for p in itertools.product(range(3), repeat=4)]
    scores = torch.stack([crf.score(emissions, torch.tensor([p])) for p in paths]).squeeze(1)  # (81,)
    by_hand = [crf.start_transitions[p[0]] + sum(emissions[0, i, y] for i, y in enumerate(p))
               + sum(crf.transitions[a, b] for a, b in zip(p, p[1:])) + crf.end_transitions[p[-1]] for p in paths]
    torch.testing.assert_close(scores, torch.stack(by_hand))
    torch.testing.assert_close(crf.log_partition(emissions), torch.logsumexp(scores, 0, keepdim=True))
    assert crf.decode(emissions, constrained=False) == [paths[int(scores.argmax())]]
    valid = [i for i, p in enumerate(paths) if _is_valid_bio(p, names)]
    assert len(valid) < len(paths)
    assert crf.decode(emissions) == [paths[max(valid, key=lambda i: float(scores[i]))]]
    # the probabilities of all sequences sum to 1
    total = sum(float(crf.log_likelihood(emissions, torch.tensor([p])).exp()) for p in paths)
    assert abs(total - 1.0) < 1e-5


@torch.no_grad()
def test_an_empty_sentence_scores_zero_and_decodes_to_nothing():
    crf, _ = _pair(4, seed=9)
    emissions, tags, mask = _ragged([3, 1, 2], 4, seed=10)
    mask[1] = False  # the second sentence has no words
    assert float(crf.log_likelihood(emissions, tags, mask)[1]) == 0.0
    assert crf.decode(emissions, mask)[1] == []
    alone = crf.log_likelihood(emissions[[0, 2]], tags[[0, 2]], mask[[0, 2]])  # the others are unchanged
    torch.testing.assert_close(crf.log_likelihood(emissions, tags, mask)[[0, 2]], alone)
    with pytest.raises(ValueError, match="padding after"):
        crf.decode(emissions, torch.tensor([[True, False, True]] * 3))


def test_pack_and_unpack_positions_by_hand():
    x = torch.tensor([[10, 11, 12, 13], [20, 21, 22, 23]])
    keep = torch.tensor([[False, True, False, True], [True, True, True, False]])
    packed, mask = pack_positions(x, keep)
    assert packed.tolist() == [[11, 13, 0], [20, 21, 22]] and mask.tolist() == [[True, True, False], [True] * 3]
    assert unpack_positions(packed, mask, keep, -1).tolist() == [[-1, 11, -1, 13], [20, 21, 22, -1]]


# ---------------------------------------------------------------------------------------
# The CRF head on BERT
# ---------------------------------------------------------------------------------------

CONFIG = BertConfig.tiny(vocab_size=50, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)


def _tagging_batch():
    """Two sentences; -100 on [CLS], [SEP], a continuation piece and padding."""
    ids = torch.tensor([[2, 10, 11, 12, 13, 3], [2, 14, 15, 3, 0, 0]])
    attention = (ids != 0).long()
    labels = torch.tensor([[-100, 1, 2, -100, 0, -100], [-100, 3, 4, -100, -100, -100]])
    return ids, attention, labels


def test_the_crf_head_trains_its_transitions_and_decodes_valid_bio_at_the_words():
    torch.manual_seed(0)
    model = BertForTokenClassification(CONFIG, num_labels=5, head="crf", label_names=LABELS[:5])
    ids, attention, labels = _tagging_batch()
    out = model(ids, attention_mask=attention, labels=labels)
    assert out.tags is None and torch.isfinite(out.loss)  # train mode: no decoding
    out.loss.backward()
    assert model.crf.transitions.grad.abs().sum() > 0 and model.classifier.weight.grad.abs().sum() > 0
    model.eval()
    out = model(ids, attention_mask=attention, labels=labels)
    words = labels != IGNORE_INDEX
    assert (out.tags[~words] == IGNORE_INDEX).all() and (out.tags[words] >= 0).all()
    # untrained transitions are 0: without constraints the path is each word's best logit
    unconstrained = model.crf.decode(*pack_positions(out.logits, words), constrained=False)
    assert sum(unconstrained, []) == out.logits.argmax(-1)[words].tolist()
    for row, keep in zip(out.tags, words):
        assert _is_valid_bio(row[keep].tolist(), LABELS)
    # the same positions given as word_mask, without labels
    assert torch.equal(model(ids, attention_mask=attention, word_mask=words).tags, out.tags)


def test_the_crf_head_with_the_same_seed_has_the_softmax_heads_classifier():
    torch.manual_seed(1)
    softmax = BertForTokenClassification(CONFIG, num_labels=5)
    torch.manual_seed(1)
    crf = BertForTokenClassification(CONFIG, num_labels=5, head="crf")
    assert torch.equal(softmax.classifier.weight, crf.classifier.weight)
    assert set(crf.state_dict()) - set(softmax.state_dict()) == {
        "crf.start_transitions", "crf.end_transitions", "crf.transitions"}  # the constraints are not saved
    with pytest.raises(ValueError, match="unknown tagging head"):
        BertForTokenClassification(CONFIG, num_labels=5, head="lstm")
    with pytest.raises(ValueError, match="need head='crf'"):
        BertForTokenClassification(CONFIG, num_labels=5, label_names=LABELS[:5])
