"""bertedu.course.stats: the course's one verdict helper (t with the seeds' degrees of freedom,
the test set's noise, the detectable difference of a null)."""
import math
import random

import pytest

from bertedu.course.stats import (
    combined, compare, compare_examples, detectable_difference, examples_se, from_estimate, proportion_se,
    standard_error, t_critical,
)


def test_standard_error_by_hand():
    # values 1, 2, 3: sample sd 1, n 3
    assert standard_error([1.0, 2.0, 3.0]) == pytest.approx(1 / math.sqrt(3))
    with pytest.raises(ValueError, match="at least two"):
        standard_error([1.0])


def test_proportion_se():
    assert proportion_se(0.5, 100) == pytest.approx(0.05)
    assert proportion_se(1.0, 10) == 0.0
    with pytest.raises(ValueError):
        proportion_se(1.5, 10)


def test_critical_values_are_students():
    # Student's t table: 12.71 (1 df), 4.30 (2), 3.18 (3), 2.78 (4); the normal's 1.96 at infinity
    for df, value in ((1, 12.706), (2, 4.303), (3, 3.182), (4, 2.776), (math.inf, 1.960)):
        assert t_critical(df) == pytest.approx(value, abs=1e-3)
    # 80% power adds t(0.8): 1.061 at 2 df, 0.842 for the normal
    assert detectable_difference(1.0, 2) == pytest.approx(4.303 + 1.061, abs=1e-3)
    assert detectable_difference(0.1, math.inf) == pytest.approx(0.1 * (1.960 + 0.842), abs=1e-4)


def test_three_seeds_call_equal_methods_different_five_percent_of_the_time():
    """The reason for the helper: with the old rule (|d| >= 2 se) three paired seeds of two equal
    methods are called different about one time in six; with t(2 df) one time in twenty."""
    rng = random.Random(0)
    trials, old, new = 4000, 0, 0
    for _ in range(trials):
        a = [rng.gauss(0, 1) for _ in range(3)]
        b = [rng.gauss(0, 1) for _ in range(3)]
        c = compare(a, b)
        old += abs(c.t) >= 2
        new += c.measurable
    assert 0.13 < old / trials < 0.21
    assert 0.035 < new / trials < 0.065


def test_pairing_removes_what_a_pair_shares():
    a = [0.2, 0.5, 0.9]
    b = [x - 0.1 + d for x, d in zip(a, (0.001, -0.001, 0.0))]
    paired, unpaired = compare(a, b, "a", "b"), compare(a, b, "a", "b", paired=False)
    assert paired.difference == pytest.approx(0.1) and paired.measurable and paired.higher == "a"
    assert not unpaired.measurable and unpaired.higher is None
    assert unpaired.verdict.startswith("no measurable difference; this design detects differences of")


def test_verdict_words_and_numbers():
    c = compare([0.867, 0.539, 0.781], [0.492, 0.492, 0.508], "MiniLM", "random weights")
    assert c.t == pytest.approx(2.39, abs=0.01) and c.df == 2
    assert not c.measurable  # 2.4 SE: the old rule said "higher"; t with 2 df needs 4.30
    assert c.detectable == pytest.approx((4.303 + 1.061) * c.se, rel=1e-3)
    assert str(c).startswith("MiniLM 0.729 vs random weights 0.497: +0.232 ± 0.097 (paired over 3 seeds; 2.4 SE")
    assert str(c).endswith(f"-> no measurable difference; this design detects differences of {c.detectable:.3f} or more")
    clear = compare([0.90, 0.91, 0.92], [0.50, 0.52, 0.51], "x", "y")
    assert clear.verdict == "x is higher" and compare([0.50, 0.52, 0.51], [0.90, 0.91, 0.92]).higher == "b"
    with pytest.raises(ValueError, match="pairs"):
        compare([1.0, 2.0], [1.0])


def test_identical_seeds_need_the_test_set():
    with pytest.raises(ValueError, match="same difference every time"):
        compare([0.877] * 3, [0.5] * 3, "twin", "majority")
    c = compare([0.877] * 3, 0.5, "twin", "majority", test_se=(0.03, 127))
    assert c.se == pytest.approx(0.03) and c.df == 127 and c.higher == "twin"
    assert "the test set" in str(c)


def test_test_set_noise_adds_with_welch_satterthwaite_df():
    se, df = combined([(0.1, 2), (0.1, math.inf)])
    assert se == pytest.approx(math.sqrt(0.02)) and df == pytest.approx(0.02**2 / (0.1**4 / 2))
    seeds_only = compare([0.8, 0.7, 0.9], [0.6, 0.55, 0.62])
    with_test = compare([0.8, 0.7, 0.9], [0.6, 0.55, 0.62], test_se=0.05)
    assert with_test.se > seeds_only.se and with_test.df > seeds_only.df


def test_examples_paired_and_clustered():
    a, b = [1, 0, 1, 1, 0, 1, 1, 1], [0, 0, 1, 0, 0, 1, 0, 1]
    c = compare_examples(a, b, "x", "y")
    diffs = [x - y for x, y in zip(a, b)]
    assert c.se == pytest.approx(standard_error(diffs)) and c.df == 7
    # clustered: whole clusters are the independent units; two clusters that move together widen it
    se, df = examples_se([1, 1, 0, 0], 0.5, clusters=["p", "p", "q", "q"])
    assert df == 1 and se == pytest.approx(math.sqrt(2 * (1.0**2 + 1.0**2)) / 4)
    assert se > examples_se([1, 1, 0, 0], 0.5)[0]
    with pytest.raises(ValueError, match="one cluster label per example"):
        examples_se([1, 0], 0, clusters=["p"])


def test_from_estimate_says_where_its_error_comes_from():
    c = from_estimate(0.3, 0.1, 40, "a", "b", how="bootstrap over 41 books")
    assert c.measurable and str(c).startswith("a - b: +0.300 ± 0.100 (bootstrap over 41 books; 3.0 SE")
    with pytest.raises(ValueError, match="say where"):
        from_estimate(0.3, 0.1, 40)
