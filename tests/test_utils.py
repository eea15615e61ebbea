import random

import pytest
import torch

from bertedu.utils import course_scale, seed_everything


def test_seed_everything_makes_draws_repeat():
    seed_everything(5)
    a = (random.random(), torch.rand(3))
    g = seed_everything(5)
    b = (random.random(), torch.rand(3))
    assert a[0] == b[0] and torch.equal(a[1], b[1])
    assert torch.equal(torch.rand(2, generator=g), torch.rand(2, generator=torch.Generator().manual_seed(5)))


def test_course_scale_switch(monkeypatch):
    monkeypatch.setenv("BERTEDU_SCALE", "gpu")
    assert course_scale() == "gpu"
    monkeypatch.setenv("BERTEDU_SCALE", "CPU")
    assert course_scale() == "cpu"
    monkeypatch.delenv("BERTEDU_SCALE")
    assert course_scale() == ("gpu" if torch.cuda.is_available() else "cpu")
    monkeypatch.setenv("BERTEDU_SCALE", "tpu")
    with pytest.raises(ValueError, match="BERTEDU_SCALE"):
        course_scale()
