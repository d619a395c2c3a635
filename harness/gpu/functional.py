"""Functional runs of the Hopper engine: the buffer summaries its statistics report.

A functional workload (``Workload.functional``) reports, per GPU and buffer, ``gpuN.mem.<buffer>.sum``,
``.min``, ``.max`` and ``.hash`` of the final contents (one fp64 value per element;
external/gpu/include/cais/gpu/functional_memory.h). :func:`summary` computes the same four
numbers with numpy from the contents a test expects, so a whole buffer is compared without
dumping memory. ``hash`` is exact on the values and their order; ``sum`` is accumulated in
element order by the engine and pairwise by numpy, so compare it exactly only for values whose
sums are exact (integers, halves, ...), else with a tolerance.
"""
from __future__ import annotations

from typing import Mapping

import numpy as np

_K = np.uint64(0x9E3779B97F4A7C15)
_C1 = np.uint64(0xBF58476D1CE4E5B9)
_C2 = np.uint64(0x94D049BB133111EB)


def _finalise(x: np.ndarray) -> np.ndarray:
    """The splitmix64 finaliser, elementwise on uint64 (wrapping arithmetic)."""
    x = (x ^ (x >> np.uint64(30))) * _C1
    x = (x ^ (x >> np.uint64(27))) * _C2
    return x ^ (x >> np.uint64(31))


def summary(values) -> dict[str, float]:
    """sum, min, max and hash of a buffer's contents in element order (any shape, flattened).

    hash = (sum over i of mix(bits(v_i) + K * (i + 1)) mod 2**64) >> 12, bits() the binary64
    pattern with -0 as +0, mix the splitmix64 finaliser, K = 0x9e3779b97f4a7c15."""
    v = np.array(values, dtype=np.float64).ravel()
    if v.size == 0:
        return {"sum": 0.0, "min": 0.0, "max": 0.0, "hash": 0.0}
    v[v == 0] = 0.0  # -0 -> +0
    i = np.arange(1, v.size + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = _finalise(v.view(np.uint64) + _K * i).sum(dtype=np.uint64)
    return {"sum": float(v.sum()), "min": float(v.min()), "max": float(v.max()), "hash": float(int(h) >> 12)}


def engine_summary(stats: Mapping[str, float], gpu: int, buffer: str) -> dict[str, float]:
    """The four statistics the engine reported for `buffer` of GPU `gpu` ({stat name: value})."""
    prefix = f"gpu{gpu}.mem.{buffer}."
    return {k: float(stats[prefix + k]) for k in ("sum", "min", "max", "hash")}
