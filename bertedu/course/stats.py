"""Comparisons in plain words: a standard error, a paired difference, and the verdict.

The course orders two methods only when the difference is at least two standard errors;
otherwise it says "no measurable difference". Notebook 00 teaches the three ideas once
(what a standard error is, the two-standard-error rule, why pairing by seed or by example
helps); every lesson then prints its comparisons with `compare`, so they all read alike:

    >>> print(compare([0.87, 0.54, 0.78], [0.49, 0.49, 0.51], "MiniLM", "random weights"))
    MiniLM 0.729 vs random weights 0.497: +0.232 ± 0.097 (2.4 standard errors, paired over 3 runs) -> MiniLM is higher

Introduced in notebook 00.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Sequence

RULE = 2.0  # standard errors a difference must reach before the course orders two methods


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


@dataclass(frozen=True)
class Comparison:
    """Method a against method b: the means, the difference a - b and its standard error."""

    name_a: str
    name_b: str
    mean_a: float
    mean_b: float
    difference: float
    se: float
    n: int
    paired: bool

    @property
    def z(self) -> float:
        """The difference in standard errors (inf when the difference is exact)."""
        if self.se == 0:
            return 0.0 if self.difference == 0 else math.copysign(math.inf, self.difference)
        return self.difference / self.se

    @property
    def measurable(self) -> bool:
        """Whether the difference reaches `RULE` (two) standard errors."""
        return abs(self.z) >= RULE

    @property
    def verdict(self) -> str:
        if not self.measurable:
            return "no measurable difference"
        return f"{self.name_a if self.difference > 0 else self.name_b} is higher"

    def __str__(self) -> str:
        how = f"paired over {self.n} runs" if self.paired else f"{self.n} runs each"
        z = "exact" if math.isinf(self.z) else f"{abs(self.z):.1f} standard errors"
        return (f"{self.name_a} {self.mean_a:.3f} vs {self.name_b} {self.mean_b:.3f}: "
                f"{self.difference:+.3f} ± {self.se:.3f} ({z}, {how}) -> {self.verdict}")


def compare(a: Sequence[float], b: Sequence[float], name_a: str = "a", name_b: str = "b",
            paired: bool = True) -> Comparison:
    """Compare two methods' scores. Paired (the default): a[i] and b[i] share a seed, a data
    order or an example, so the standard error is that of the differences a[i] - b[i], which
    leaves out what the pair has in common. Unpaired: sqrt(se(a)² + se(b)²)."""
    if paired:
        if len(a) != len(b):
            raise ValueError(f"paired scores come in pairs: {len(a)} against {len(b)}")
        diffs = [x - y for x, y in zip(a, b)]
        se = standard_error(diffs)
    else:
        se = math.hypot(standard_error(a), standard_error(b))
    mean_a, mean_b = statistics.fmean(a), statistics.fmean(b)
    return Comparison(name_a, name_b, mean_a, mean_b, mean_a - mean_b, se, min(len(a), len(b)), paired)
