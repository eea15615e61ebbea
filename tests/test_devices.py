"""Devices and precisions on a machine with a GPU, checked without one: CUDA is reported
present, and the device and precision each path resolves to are read off.

The scale switch (BERTEDU_SCALE) decides where work runs when no --device is given: at the
CPU scale everything stays on the CPU in fp32, so the CPU-sized notebooks never mix devices
or precisions; at the GPU scale it goes to the GPU in bf16. An explicit --device wins, and the
precision follows the device it resolved to.
"""

import json
from pathlib import Path

import pytest
import torch

import bertedu.training.finetune
import bertedu.training.pretrain
from bertedu.cli import main
from bertedu.training.config import TrainConfig
from bertedu.utils import resolve_device, resolve_precision

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def cuda_present(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 1)


@pytest.mark.parametrize("scale, device, precision", [("cpu", "cpu", "fp32"), ("gpu", "cuda", "bf16")])
def test_the_device_and_precision_follow_the_scale(cuda_present, monkeypatch, scale, device, precision):
    monkeypatch.setenv("BERTEDU_SCALE", scale)
    assert resolve_device(None).type == device
    assert resolve_precision("auto") == precision
    assert resolve_precision("auto", "cpu") == "fp32"  # an explicit device decides, whatever the scale
    assert resolve_precision("auto", "cuda") == "bf16"


def test_unset_the_scale_is_the_gpu_when_there_is_one(cuda_present, monkeypatch):
    monkeypatch.delenv("BERTEDU_SCALE", raising=False)
    assert resolve_device(None) == torch.device("cuda", 0)
    TrainConfig(steps=1)  # its device check passes: the GPU it would use exists


class Captured(Exception):
    """Raised by the stand-in for the loop, carrying the TrainConfig a job handed it."""


def capture(name):
    def stand_in(*args, **kwargs):
        train_cfg = next(a for a in (*args, *kwargs.values()) if isinstance(a, TrainConfig))
        raise Captured(train_cfg)

    return stand_in


def test_a_job_on_the_cpu_of_a_gpu_machine_trains_in_fp32(cuda_present, monkeypatch, tmp_path):
    """--device cpu at the GPU scale: pretrain and finetune resolve --precision auto on the CPU
    (fp32), not by whether the machine has a GPU (they used to take bf16)."""
    monkeypatch.setenv("BERTEDU_SCALE", "gpu")
    monkeypatch.setattr(bertedu.training.pretrain, "train", capture("train"))
    monkeypatch.setattr(bertedu.training.finetune, "train_with_early_stopping", capture("train_with_early_stopping"))
    jobs = [["pretrain", "--preset", "tiny", "--max-documents", "20", "--vocab", "minilm", "--steps", "1",
             "--out", str(tmp_path / "pre")],
            ["finetune", "--task", str(ROOT / "tests/data/glue/SST-2"), "--init", "random", "--preset", "tiny",
             "--max-train", "64", "--max-eval", "16", "--steps", "1", "--out", str(tmp_path / "ft")]]
    for args in jobs:
        for device, precision in (("cpu", "fp32"), (None, "bf16")):
            extra = ["--device", device] if device else []
            out = args[-1] + (device or "auto")
            with pytest.raises(Captured) as caught:
                main([*args[:-1], out, *extra, "--precision", "auto", "--no-progress"])
            assert caught.value.args[0].precision == precision, (args[0], device)


CPU_SIZED = ("06_pretraining", "17_bert_vs_gpt", "18_distilbert")


@pytest.mark.parametrize("name", CPU_SIZED)
def test_cpu_sized_notebooks_train_on_the_cpu_at_either_scale(name):
    """Notebooks that train CPU-sized models and then compare them with CPU tensors (06's
    library-vs-by-hand weights, 17's fills, 18's student against its teacher) pin the device,
    so on a GPU machine nothing moves their models to CUDA behind their back."""
    notebook = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text(encoding="utf-8"))
    training = [("".join(c["source"])) for c in notebook["cells"] if c["cell_type"] == "code"
                and any(call in "".join(c["source"]) for call in (" train(", " pretrain(", "lm_study.train_lm("))]
    assert training, f"{name} trains nothing any more: update CPU_SIZED"
    for source in training:
        if "lm_study.train_lm(" in source:  # 17: the recipe comes from bertedu.course.lm_study, which pins it
            from bertedu.course.lm_study import study_recipe

            assert "lm_study.study_recipe(" in source and "device=" not in source, source[:300]
            assert study_recipe().device == "cpu"
        else:
            assert 'device="cpu"' in source, source[:300]


def test_tf32_is_switched_on_for_cuda_only():
    """TF32 matmuls on CUDA (issue 52 item 5); on the CPU the flags are left as they were."""
    from bertedu.training.distributed import allow_tf32

    before = torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32
    try:
        torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
        assert allow_tf32(torch.device("cpu")) is False
        assert torch.backends.cuda.matmul.allow_tf32 is False
        assert allow_tf32(torch.device("cuda", 0)) is True
        assert torch.backends.cuda.matmul.allow_tf32 is True and torch.backends.cudnn.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = before


def test_distill_precision_is_auto():
    """distill resolves its precision like pretrain and finetune: bf16 on CUDA, fp32 on the CPU."""
    from bertedu.training.distill import DistillConfig

    assert DistillConfig.__dataclass_fields__["precision"].default == "auto"
    assert resolve_precision(DistillConfig.__dataclass_fields__["precision"].default, "cpu") == "fp32"
