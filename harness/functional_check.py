"""A functional run checks its own values: every collective's result buffer against what the
collective must leave there, on every GPU.

In a functional run (`net.functional=true`) every store that carries no register writes its
GPU's rank + 1 (the engine's functional store: a GEMM's partial output, a LayerNorm's shard), and
collectives move those values through tile registers, DMA, remote reductions and the switch.
So after a reduction every element holds sum(g + 1) over the GPUs, and row block k of a
gathered buffer holds what GPU k's source buffer holds. The engine reports each buffer's sum,
min, max and an order-sensitive hash per GPU (harness/gpu/functional.py); the expected contents
are built with numpy and compared on all four, so a misplaced block or a double-counted
contribution fails as surely as a missing one.

A collective whose result is in the buffer named after it gets the rule of its kind
(:func:`default_expectation`); a lowering states what it leaves where that rule does not hold
(`Lowering.expect`). A collective that leaves no buffer (a gather read straight into a GEMM's
K loop) has nothing to check; the count of checks in results.csv says how many were made.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping

import numpy as np

from harness.errors import SimulationError
from harness.gpu import functional
from harness.workload.graph import Collective


def reduced_value(gpus: int) -> float:
    """What a reduction of every GPU's functional store leaves: sum over g of (g + 1)."""
    return float(gpus * (gpus + 1) // 2)


@dataclass(frozen=True)
class Reduced:
    """Every element of `buffer` is the sum over the GPUs ([elements] per GPU)."""
    buffer: str
    elements: int

    def contents(self, gpu: int, gpus: int, source: Callable[[int, str], float]) -> np.ndarray:
        return np.full(self.elements, reduced_value(gpus))


@dataclass(frozen=True)
class Gathered:
    """`buffer` is [rows, cols]; row block k (rows / gpus rows) holds GPU k's `source`, a
    constant in a functional run. own: what GPU g's own block holds instead (None: its source,
    like every other block)."""
    buffer: str
    source: str
    rows: int
    cols: int
    own: float | None = None

    def contents(self, gpu: int, gpus: int, source: Callable[[int, str], float]) -> np.ndarray:
        per_block = np.array([source(k, self.source) for k in range(gpus)], dtype=float)
        if self.own is not None:
            per_block[gpu] = self.own
        return np.repeat(per_block, self.rows // gpus)[:, None] * np.ones((1, self.cols))


@dataclass(frozen=True)
class Computed:
    """Contents a lowering computes itself (contents(gpu) -> array), e.g. a ring's partial sums."""
    buffer: str
    compute: Callable[[int], np.ndarray]

    def contents(self, gpu: int, gpus: int, source: Callable[[int, str], float]) -> np.ndarray:
        return self.compute(gpu)


Expectation = Reduced | Gathered | Computed


def default_expectation(op: Collective, buffers: Mapping[str, int], tensors: Mapping[str, int],
                        names: Mapping[int, str], gpus: int) -> Expectation | None:
    """The rule of the collective's kind for its buffer (tensors[op.name]): all_reduce leaves the
    sum in the whole tensor, reduce_scatter in this GPU's shard, all_gather every GPU's shard of
    its source. None: no buffer is named for the result. A buffer of another size is a lowering
    that did something else there and must say what (Lowering.expect)."""
    if op.name not in tensors:
        return None
    buffer = names[tensors[op.name]]
    whole = op.rows * op.cols
    size = {"all_reduce": whole, "reduce_scatter": whole // gpus, "all_gather": whole}[op.kind]
    if buffers[buffer] != size:
        raise ValueError(f"lowering: {op.kind} '{op.name}' leaves its result in {buffer} of {buffers[buffer]} elements, "
                         f"not the {size} its kind leaves: state what it holds with Lowering.expect")
    if op.kind != "all_gather":
        return Reduced(buffer, size)
    src = tensors.get(op.source) if op.source else None
    if src is None:
        src = tensors.get(f"{op.name}.in")
    if src is None:
        raise ValueError(f"lowering: all_gather '{op.name}' has no source buffer: state what it holds with Lowering.expect")
    return Gathered(buffer, names[src], op.rows, op.cols)


def check(stats: Mapping[str, float], expectations: Mapping[str, Expectation | None], gpus: int) -> int:
    """Compare every expected buffer on every GPU with the engine's summary; return how many
    (collective, GPU) pairs were checked. A difference is a SimulationError naming the
    collective, the GPU and the buffer."""
    def source(gpu: int, buffer: str) -> float:
        s = functional.engine_summary(stats, gpu, buffer)
        if s["min"] != s["max"]:
            raise SimulationError(f"functional check: gpu{gpu} {buffer} is not one value "
                                  f"(min {s['min']:g}, max {s['max']:g}), so its gather cannot be predicted")
        return s["min"]

    checked = 0
    for op_name, exp in expectations.items():
        if exp is None:
            continue
        for g in range(gpus):
            want = functional.summary(exp.contents(g, gpus, source))
            got = functional.engine_summary(stats, g, exp.buffer)
            if got != want:
                diff = ", ".join(f"{k} {got[k]:g} (expected {want[k]:g})" for k in ("sum", "min", "max") if got[k] != want[k])
                raise SimulationError(f"functional check: '{op_name}' left wrong values in {exp.buffer} on gpu{g}: "
                                      f"{diff or 'same sum, min and max in another order'}")
            checked += 1
    return checked
