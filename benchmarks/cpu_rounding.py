"""Do two machines round a float32 matrix product alike? Prints the CPU, PyTorch's CPU
capability, and the sha256 of one seeded (512 x 768) @ (768 x 3072) product with its median
time. Equal hashes on two machines: the same bits; different hashes: a short, high-learning-
rate fine-tune (notebook 11's) can end with different answers on the two.

    python benchmarks/cpu_rounding.py
    MKL_CBWR=AVX2 python benchmarks/cpu_rounding.py   # ask MKL for its AVX2 code path

MKL reads MKL_CBWR ("conditional numerical reproducibility") when it starts: AVX2 or
COMPATIBLE pin its code path, at a cost in speed that the printed time shows.
"""

from __future__ import annotations

import hashlib
import os
import statistics
import time

import torch
from finetune_runs import machine  # this folder is on sys.path when the script runs


def product_hash(seed: int = 0) -> tuple[str, float]:
    """sha256 (first 16 hex digits) of a seeded float32 product, and its median time in ms over 20 runs."""
    gen = torch.Generator().manual_seed(seed)
    a, b = torch.randn(512, 768, generator=gen), torch.randn(768, 3072, generator=gen)
    digest = hashlib.sha256((a @ b).numpy().tobytes()).hexdigest()[:16]
    times = []
    for _ in range(20):
        start = time.perf_counter()
        a @ b
        times.append(1e3 * (time.perf_counter() - start))
    return digest, statistics.median(times[2:])


def main() -> None:
    digest, ms = product_hash()
    print(f"machine: {machine()}, {torch.get_num_threads()} threads, MKL_CBWR={os.environ.get('MKL_CBWR', 'unset')}")
    print(f"float32 product sha256 {digest}, median {ms:.1f} ms")


if __name__ == "__main__":
    main()
