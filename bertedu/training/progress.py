"""The training loop's progress bar: tqdm over the run's budget (steps, tokens or seconds); and
one line per stage of data preparation or evaluation (`stage`), so no minute passes in silence."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from typing import Iterator, Optional

from .config import TrainConfig, TrainState


class ProgressBar:
    """tqdm over the budget (steps, else tokens, else seconds): loss, tokens/s and an ETA."""

    def __init__(self, cfg: "TrainConfig", max_steps: Optional[int], state: "TrainState", enabled: bool):
        self.bar = None
        if not enabled:
            return
        from tqdm.auto import tqdm  # a widget in Jupyter, text in a terminal

        if max_steps is not None:
            self.unit, total, done = "step", max_steps, state.step
        elif cfg.max_tokens is not None:
            self.unit, total, done = "tok", cfg.max_tokens, state.tokens_seen
        else:
            self.unit, total, done = "s", cfg.time_budget, state.elapsed_s
        self.done = done
        seconds = "{l_bar}{bar}| {n:.0f}/{total:.0f} s [{elapsed}<{remaining}{postfix}]" if self.unit == "s" else None
        self.bar = tqdm(total=total, initial=done, unit=self.unit, unit_scale=self.unit == "tok",
                        bar_format=seconds, dynamic_ncols=True)
        self.start = (state.tokens_seen, time.perf_counter())

    def update(self, state: "TrainState", loss: Optional[float]) -> None:
        """Advance to `state`; loss: the last one read back from the device (None before the first)."""
        if self.bar is None:
            return
        now = {"step": state.step, "tok": state.tokens_seen, "s": state.elapsed_s}[self.unit]
        self.bar.update(min(now, self.bar.total) - self.done)
        self.done = min(now, self.bar.total)
        speed = (state.tokens_seen - self.start[0]) / max(time.perf_counter() - self.start[1], 1e-9)
        shown = {} if loss is None else {"loss": f"{loss:.4f}"}
        self.bar.set_postfix(**shown, tok_s=f"{speed:,.0f}", refresh=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()


PROGRESS_ENV = "BERTEDU_PROGRESS"  # "1": stage lines also when stderr is not a terminal; "0": never


def stage_lines_wanted(enabled: bool) -> bool:
    """Whether `stage` prints: when asked (`--progress`, the default on the command line), from
    process 0 only, and on a terminal (a log or a test's captured stderr keeps its one error
    line) unless $BERTEDU_PROGRESS says otherwise."""
    if not enabled or os.environ.get("RANK", "0") != "0":
        return False
    forced = os.environ.get(PROGRESS_ENV)
    if forced is not None:
        return forced != "0"
    return sys.stderr.isatty()


@contextlib.contextmanager
def stage(what: str, enabled: bool = True) -> Iterator[dict]:
    """Say on stderr that a slow stage starts, and when it ends what it made and how long it took.

        with stage("tokenising sentiment-zh", cfg.progress) as made:
            items = io.encode(task.train)
            made["training examples"] = len(items)

    prints `bertedu: tokenising sentiment-zh ...` then
    `bertedu: tokenising sentiment-zh: 9,600 training examples in 12.3 s`. Nothing goes to stdout,
    where the results are. Introduced for the command line (issue 53: data preparation and dev
    evaluations of minutes had printed nothing).
    """
    show = stage_lines_wanted(enabled)
    made: dict = {}
    if show:
        print(f"bertedu: {what} ...", file=sys.stderr, flush=True)
    start = time.perf_counter()
    yield made
    if show:
        counts = ", ".join(f"{n:,} {name}" if isinstance(n, int) else f"{n} {name}" for name, n in made.items())
        print(f"bertedu: {what}: {counts + ' ' if counts else ''}in {time.perf_counter() - start:.1f} s",
              file=sys.stderr, flush=True)
