"""The training loop's progress bar: tqdm over the run's budget (steps, tokens or seconds)."""

from __future__ import annotations

import time
from typing import Optional

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

    def update(self, state: "TrainState", loss: float) -> None:
        if self.bar is None:
            return
        now = {"step": state.step, "tok": state.tokens_seen, "s": state.elapsed_s}[self.unit]
        self.bar.update(min(now, self.bar.total) - self.done)
        self.done = min(now, self.bar.total)
        speed = (state.tokens_seen - self.start[0]) / max(time.perf_counter() - self.start[1], 1e-9)
        self.bar.set_postfix(loss=f"{loss:.4f}", tok_s=f"{speed:,.0f}", refresh=False)

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()
