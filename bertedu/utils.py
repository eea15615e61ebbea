"""Small helpers: seeds, threads, the scale switch (every notebook's first cell), and the
eval-mode and mixed-precision switches the training and inference code share."""

from __future__ import annotations

import contextlib
import dataclasses
import os
import random
import warnings
from typing import Any, Iterator

import torch
from torch import nn

PRECISIONS = ("auto", "fp32", "bf16")


def setting(default: Any, help: str) -> Any:
    """A config dataclass field with its help text, which `bertedu --help` prints (with the
    default, read from the field itself, so the two cannot drift apart)."""
    return dataclasses.field(default=default, metadata={"help": help})


def permissions_as_umask(*paths: str | os.PathLike) -> None:
    """Give files the permissions the user's umask asks for (as `open` would: 0o666 & ~umask).

    `tempfile.mkstemp` (behind the atomic writes) and safetensors create their files 0600, so
    without this a shared run folder's weights and vocabulary are readable by their owner alone.
    """
    mask = os.umask(0)
    os.umask(mask)
    for path in paths:
        os.chmod(path, 0o666 & ~mask)


def seed_everything(seed: int = 0) -> torch.Generator:
    """Seed Python, NumPy (if present) and PyTorch; return a torch.Generator seeded the same."""
    random.seed(seed)
    try:
        import numpy as np

        np.random.seed(seed)
    except ImportError:  # numpy is a dependency, but seeding must not be what breaks
        pass
    torch.manual_seed(seed)
    return torch.Generator().manual_seed(seed)


def course_scale() -> str:
    """"cpu" (small runs, what the stored notebooks show) or "gpu" (BERT-BASE, full data).

    The one switch for expensive work: set BERTEDU_SCALE=gpu or cpu; unset, it is "gpu"
    exactly when CUDA is available.
    """
    value = os.environ.get("BERTEDU_SCALE", "").strip().lower()
    if value in ("cpu", "gpu"):
        return value
    if value:
        raise ValueError(f"BERTEDU_SCALE must be 'cpu' or 'gpu', got {value!r}")
    return "gpu" if torch.cuda.is_available() else "cpu"


def setup_notebook(seed: int = 0, threads: int = 2) -> str:
    """Seeds, thread count and the scale; returns the scale ("cpu" or "gpu")."""
    torch.set_num_threads(threads)
    seed_everything(seed)
    return course_scale()


@contextlib.contextmanager
def eval_mode(model: nn.Module) -> Iterator[nn.Module]:
    """Run the body in eval mode (no dropout), then put the model back as it was."""
    was_training = model.training
    model.eval()
    try:
        yield model
    finally:
        model.train(was_training)


def resolve_device(name: str | None = None, local_rank: int = 0) -> torch.device:
    """`--device`: None picks this process's GPU (cuda:LOCAL_RANK under torchrun) when PyTorch
    sees one and the scale switch is "gpu" (`course_scale`: BERTEDU_SCALE=cpu keeps work on the
    CPU of a GPU machine, so CPU-sized notebooks never mix devices), else the CPU; a bare
    "cuda" means this process's GPU too. Asking for a GPU the
    machine does not have is a `SettingError` (one line on the command line), not a traceback
    from deep inside PyTorch."""
    from .errors import SettingError

    if name is None:
        name = "cuda" if torch.cuda.is_available() and course_scale() == "gpu" else "cpu"
    try:
        device = torch.device(name)
    except RuntimeError as error:
        raise SettingError(f"--device {name}: not a device PyTorch knows (cpu, cuda, cuda:N)") from error
    if device.type == "cuda":
        if not torch.cuda.is_available():
            raise SettingError(f"--device {name}: this machine has no CUDA GPU that PyTorch can use "
                               "(torch.cuda.is_available() is False); leave --device out to train on the CPU.")
        if device.index is None:
            device = torch.device("cuda", local_rank)
        if device.index >= torch.cuda.device_count():
            raise SettingError(f"--device {name}: this machine has {torch.cuda.device_count()} CUDA GPU(s), "
                               "numbered from 0.")
    return device


def resolve_precision(precision: str, device: torch.device | str | None = None) -> str:
    """"auto" -> "bf16" on CUDA, "fp32" elsewhere; "fp32" and "bf16" stay as they are. device:
    where the work runs (None: where `resolve_device(None)` puts it)."""
    if precision not in PRECISIONS:
        raise ValueError(f"precision must be one of {', '.join(PRECISIONS)}, got {precision!r}")
    if precision != "auto":
        return precision
    on_cuda = torch.device(resolve_device(None) if device is None else device).type == "cuda"
    return "bf16" if on_cuda else "fp32"


def autocast(precision: str, device: torch.device):
    """The mixed-precision context for `precision` on `device`: bf16 autocast (matmuls in
    bf16, reductions and the losses in fp32) on CUDA and on the CPU, nothing for fp32.

    CPUs with bf16 instructions (e.g. avx512_bf16, AMX) run bf16 matmuls about twice as
    fast as fp32 ones; on others (AVX2 only) PyTorch emulates them, many times slower, and
    this warns.
    """
    precision = resolve_precision(precision, device)
    if precision == "bf16":
        if torch.device(device).type == "cpu" and not cpu_has_bf16():
            warnings.warn(
                f"bf16 autocast on a CPU without bf16 instructions ({torch.backends.cpu.get_cpu_capability()}): "
                "PyTorch emulates the bf16 matmuls, many times slower than fp32 here; "
                "use precision 'fp32' (or 'auto', which picks fp32 on a CPU).", RuntimeWarning, stacklevel=2)
        return torch.autocast(torch.device(device).type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


def cpu_has_bf16() -> bool:
    """Whether this CPU runs bf16 matmuls natively (oneDNN's test: AVX-512 with bf16 support)."""
    return bool(torch.ops.mkldnn._is_mkldnn_bf16_supported())


# Dense bf16 tensor-core peak FLOP/s (no sparsity), from NVIDIA's data sheets, for model-FLOP
# utilisation (benchmarks/bench.py, notebook 07). The H100 comes in three forms with three
# peaks; a bare "H100" in a device name is the SXM board (CUDA names the PCIe and NVL ones).
PEAK_BF16_FLOPS = {
    "GH200": 989e12, "H200": 989e12, "H100 PCIe": 756e12, "H100 NVL": 835e12, "H100": 989e12, "H800": 989e12,
    "H20": 148e12, "B200": 2250e12, "A100": 312e12, "A800": 312e12, "L40S": 362e12, "L40": 181e12,
    "L4": 121e12, "A10": 125e12,
}


def peak_bf16_flops(device_name: str) -> float | None:
    """The published dense bf16 peak of the GPU called `device_name` (torch.cuda.get_device_name()),
    None for one not in `PEAK_BF16_FLOPS`. Names match as whole words, the longest first, so
    "NVIDIA L40" is not an L4 and "NVIDIA H100 PCIe" is not the SXM H100."""
    import re

    for key in sorted(PEAK_BF16_FLOPS, key=len, reverse=True):
        if re.search(rf"(?<![A-Za-z0-9]){re.escape(key)}(?![A-Za-z0-9])", device_name, flags=re.IGNORECASE):
            return PEAK_BF16_FLOPS[key]
    return None
