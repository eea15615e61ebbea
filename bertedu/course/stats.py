"""The course's one verdict helper: when does a difference between two methods count?

Every sentence in the course that orders two methods (or a method and a baseline) is judged
here, so they all follow one rule, taught in notebook 00:

1. **Pair what can be paired.** Two methods run with the same seeds, or scored on the same
   test examples, are compared through their differences a[i] - b[i]: what a pair shares
   (a lucky seed, an easy example) cancels.
2. **Use the t distribution with the right degrees of freedom.** With n paired seeds the
   standard error of the mean difference is estimated from n numbers, so the difference must
   reach t(0.975, n - 1) standard errors, not 2: 4.30 with three seeds, 3.18 with four, 2.78
   with five (Student 1908). Then equal methods are called different 5% of the time.
3. **Add the test set's noise when the sentence is about the method**, not about these
   particular seeds: the test set is a sample too. `test_se` adds it; the degrees of freedom
   of the sum come from the Welch-Satterthwaite formula.
4. **A null says what the design could have seen.** "No measurable difference" is not
   "equal": the helper says the smallest difference this design detects four times in five
   ((t(0.975) + t(0.8)) standard errors, the usual 80% power).

    >>> c = compare([0.867, 0.539, 0.781], [0.492, 0.492, 0.508], "MiniLM", "random weights")
    >>> print(c)   # doctest: +NORMALIZE_WHITESPACE
    MiniLM 0.729 vs random weights 0.497: +0.232 ± 0.097 (paired over 3 seeds; 2.4 SE, needs 4.30 with 2 df)
    -> no measurable difference; this design detects differences of 0.520 or more

A comparison of two single runs on the same test examples is `compare_examples` (paired over
the examples, optionally clustered, for example by book). Introduced in notebook 00.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Optional, Sequence, Union

ALPHA = 0.05  # the chance of calling two equal methods different
POWER = 0.80  # how often a real difference of `detectable` size is found


def standard_error(values: Sequence[float]) -> float:
    """The standard error of the mean of `values`: their sample standard deviation / sqrt(n).
    How far the mean would move, typically, if the whole experiment were run again."""
    if len(values) < 2:
        raise ValueError(f"a standard error needs at least two values, got {len(values)}")
    return statistics.stdev(values) / math.sqrt(len(values))


def proportion_se(p: float, n: int) -> float:
    """The standard error of an accuracy `p` measured on `n` independent examples: sqrt(p(1-p)/n)."""
    if n < 1 or not 0.0 <= p <= 1.0:
        raise ValueError(f"need 0 <= p <= 1 and n >= 1, got p={p}, n={n}")
    return math.sqrt(p * (1.0 - p) / n)


def t_quantile(q: float, df: float) -> float:
    """The q-quantile of Student's t distribution with `df` degrees of freedom (the normal's
    when df is infinite)."""
    from scipy import stats

    if df <= 0:
        raise ValueError(f"degrees of freedom must be positive, got {df}")
    return float(stats.norm.ppf(q) if math.isinf(df) else stats.t.ppf(q, df))


def t_critical(df: float, alpha: float = ALPHA) -> float:
    """How many standard errors a difference must reach: t(1 - alpha/2, df). 4.30 for df=2."""
    return t_quantile(1.0 - alpha / 2.0, df)


def detectable_difference(se: float, df: float, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest true difference this design finds with probability `power`:
    (t(1 - alpha/2) + t(power)) standard errors."""
    return (t_critical(df, alpha) + t_quantile(power, df)) * se


def combined(parts: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Independent noise sources (se_i, df_i) added: the total standard error and its
    Welch-Satterthwaite degrees of freedom, sum(se_i^2)^2 / sum(se_i^4 / df_i)."""
    parts = [(se, df) for se, df in parts if se > 0]
    if not parts:
        return 0.0, math.inf
    if len(parts) == 1:
        return parts[0]
    variance = sum(se**2 for se, _ in parts)
    spread = sum(se**4 / df for se, df in parts if not math.isinf(df))
    return math.sqrt(variance), (variance**2 / spread if spread > 0 else math.inf)


@dataclass(frozen=True)
class Comparison:
    """Method a against method b: the means, the difference a - b, its standard error and
    degrees of freedom, and the verdict the course's rule gives."""

    name_a: str
    name_b: str
    mean_a: float
    mean_b: float
    difference: float
    se: float
    df: float
    how: str  # what the standard error counts, e.g. "paired over 3 seeds and the test set"
    alpha: float = ALPHA

    @property
    def critical(self) -> float:
        """Standard errors the difference must reach (t(1 - alpha/2, df))."""
        return t_critical(self.df, self.alpha)

    @property
    def t(self) -> float:
        """The difference in standard errors (inf when it is exact)."""
        if self.se == 0:
            return 0.0 if self.difference == 0 else math.copysign(math.inf, self.difference)
        return self.difference / self.se

    @property
    def measurable(self) -> bool:
        """Whether the difference reaches the critical value: a test at level alpha."""
        return abs(self.t) >= self.critical

    @property
    def detectable(self) -> float:
        """The smallest difference this design finds four times in five."""
        return detectable_difference(self.se, self.df, self.alpha)

    @property
    def higher(self) -> Optional[str]:
        """The name of the measurably higher method, or None."""
        if not self.measurable:
            return None
        return self.name_a if self.difference > 0 else self.name_b

    @property
    def verdict(self) -> str:
        if self.higher is not None:
            return f"{self.higher} is higher"
        return f"no measurable difference; this design detects differences of {_fmt(self.detectable)} or more"

    def __str__(self) -> str:
        df = "∞" if math.isinf(self.df) else f"{self.df:.0f}" if self.df >= 10 else f"{self.df:.1f}".rstrip("0").rstrip(".")
        size = "exact" if math.isinf(self.t) else f"{abs(self.t):.1f} SE"
        means = (f"{self.name_a} - {self.name_b}: " if math.isnan(self.mean_a) or math.isnan(self.mean_b)
                 else f"{self.name_a} {_fmt(self.mean_a)} vs {self.name_b} {_fmt(self.mean_b)}: ")
        return (f"{means}{self.difference:+.{_digits(self.difference, self.se)}f} ± {_fmt(self.se)} "
                f"({self.how}; {size}, needs {self.critical:.2f} with {df} df) -> {self.verdict}")


def _digits(*values: float) -> int:
    """Decimals that show the smallest non-zero magnitude among `values` with 2 significant digits, 3 at least."""
    small = min((abs(v) for v in values if v and math.isfinite(v)), default=1.0)
    return max(3, min(6, 1 - math.floor(math.log10(small))))


def _fmt(value: float) -> str:
    return f"{value:.{_digits(value)}f}" if abs(value) < 100 else f"{value:,.1f}"


Scores = Union[Sequence[float], float]
TestNoise = Union[float, tuple[float, float], None]


def _as_list(values: Scores, n: int) -> list[float]:
    return [float(values)] * n if isinstance(values, (int, float)) else [float(v) for v in values]


def compare(a: Sequence[float], b: Scores, name_a: str = "a", name_b: str = "b", *, paired: bool = True,
            test_se: TestNoise = None, alpha: float = ALPHA) -> Comparison:
    """Compare two methods' scores over seeds (or runs).

    a, b: one score per seed. Paired (the default): a[i] and b[i] share a seed, so the standard
    error is that of the differences a[i] - b[i], with n - 1 degrees of freedom. `b` may be one
    number (a baseline with no seed, such as a majority class). Unpaired: Welch's
    sqrt(se(a)^2 + se(b)^2) and its degrees of freedom.
    test_se: the test set's sampling noise of the difference, as a standard error or as
    (standard error, degrees of freedom) (`examples_se` computes it from per-example scores);
    pass it when the sentence is about the methods, not about these seeds.
    Identical differences at every seed cannot be judged by the seeds: then `test_se` is required.
    """
    a = _as_list(a, 1)
    b = _as_list(b, len(a))
    if paired and len(a) != len(b):
        raise ValueError(f"paired scores come in pairs: {len(a)} against {len(b)}")
    if paired:
        diffs = [x - y for x, y in zip(a, b)]
        seeds = (standard_error(diffs) if len(diffs) > 1 else 0.0, len(diffs) - 1)
        how = f"paired over {len(diffs)} seed{'s' if len(diffs) > 1 else ''}"
    else:
        seeds = combined([(standard_error(a), len(a) - 1), (standard_error(b), len(b) - 1)])
        how = f"{len(a)} and {len(b)} unpaired seeds"
    parts = [seeds] if seeds[0] > 0 else []
    if test_se is not None:
        test = test_se if isinstance(test_se, tuple) else (float(test_se), math.inf)
        parts.append(test)
        how += " and the test set"
    elif seeds[0] == 0:
        raise ValueError(f"{name_a} - {name_b}: the seeds give the same difference every time, so they cannot "
                         "judge it; pass test_se (the test set's noise) or find out why the seeds agree")
    se, df = combined(parts)
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    return Comparison(name_a, name_b, mean_a, mean_b, mean_a - mean_b, se, df, how, alpha)


def examples_se(a: Sequence[float], b: Scores = 0.0, clusters: Optional[Sequence] = None) -> tuple[float, float]:
    """The sampling noise of mean(a - b) over a test set: (standard error, degrees of freedom).

    a, b: per-example scores of two methods on the same examples (0/1 correct, F1, a loss);
    `b` may be one number. `clusters` (one label per example, for example the book a chapter
    comes from): examples of one cluster are not independent, so the standard error is the
    cluster-robust one, sqrt(G / (G - 1) * sum_g (sum of the centred differences in g)^2) / n,
    with G - 1 degrees of freedom."""
    diffs = [x - y for x, y in zip(_as_list(a, 1), _as_list(b, len(a)))]
    n = len(diffs)
    if n < 2:
        raise ValueError(f"a test set's noise needs at least two examples, got {n}")
    if clusters is None:
        return standard_error(diffs), n - 1
    if len(clusters) != n:
        raise ValueError(f"one cluster label per example: {len(clusters)} labels for {n} examples")
    mean = statistics.fmean(diffs)
    sums: dict = {}
    for d, g in zip(diffs, clusters):
        sums[g] = sums.get(g, 0.0) + (d - mean)
    groups = len(sums)
    if groups < 2:
        raise ValueError("clustered standard errors need at least two clusters")
    return math.sqrt(groups / (groups - 1) * sum(s * s for s in sums.values())) / n, groups - 1


def compare_examples(a: Sequence[float], b: Scores, name_a: str = "a", name_b: str = "b", *,
                     clusters: Optional[Sequence] = None, alpha: float = ALPHA) -> Comparison:
    """Two single runs (or a run and a constant) scored on the same test examples, paired
    example by example. The verdict is about these two trained models on a test set drawn
    like this one; seeds' noise is not in it (use `compare` with `test_se` for that)."""
    a = _as_list(a, 1)
    b = _as_list(b, len(a))
    se, df = examples_se(a, b, clusters)
    how = (f"paired over {len(a):,} examples in {df + 1:,} clusters" if clusters is not None
           else f"paired over {len(a):,} examples")
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    return Comparison(name_a, name_b, mean_a, mean_b, mean_a - mean_b, se, df, how, alpha)


def from_estimate(difference: float, se: float, df: float, name_a: str = "a", name_b: str = "b", *,
                  mean_a: float = math.nan, mean_b: float = math.nan, how: str = "",
                  alpha: float = ALPHA) -> Comparison:
    """A verdict on a difference whose standard error was found another way (a bootstrap, a
    formula), with the degrees of freedom that standard error rests on (math.inf for a large
    test set). Prefer `compare` or `compare_examples`; say in `how` where `se` comes from."""
    if not how:
        raise ValueError("say where the standard error comes from (how=...)")
    return Comparison(name_a, name_b, mean_a, mean_b, difference, se, df, how, alpha)
