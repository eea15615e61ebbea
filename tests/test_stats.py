"""bertedu.course.stats: the standard error, the paired comparison and its verdict."""
import math

import pytest

from bertedu.course.stats import compare, proportion_se, standard_error


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


def test_pairing_removes_what_a_pair_shares():
    # b is a with a constant shift: paired, the difference is exact; unpaired, it drowns in the spread
    a = [0.2, 0.5, 0.9]
    b = [x - 0.1 for x in a]
    paired, unpaired = compare(a, b, "a", "b"), compare(a, b, "a", "b", paired=False)
    assert paired.difference == pytest.approx(0.1) and paired.se == pytest.approx(0.0, abs=1e-12)
    assert paired.measurable and paired.verdict == "a is higher"
    assert not unpaired.measurable and unpaired.verdict == "no measurable difference"
    assert "exact" in str(paired) or "standard errors" in str(paired)


def test_verdict_words_and_rule():
    c = compare([0.867, 0.539, 0.781], [0.492, 0.492, 0.508], "MiniLM", "random weights")
    assert c.z == pytest.approx(2.39, abs=0.01) and c.measurable
    assert str(c).endswith("-> MiniLM is higher")
    lower = compare([0.492, 0.492, 0.508], [0.867, 0.539, 0.781], "random weights", "MiniLM")
    assert lower.verdict == "MiniLM is higher"
    close = compare([0.50, 0.60], [0.55, 0.52])
    assert not close.measurable and "no measurable difference" in str(close)
    with pytest.raises(ValueError, match="pairs"):
        compare([1.0, 2.0], [1.0])
