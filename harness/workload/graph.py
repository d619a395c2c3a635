"""The operator graph of a tensor-parallel transformer layer: plain data a scheme reads.

Like Chakra's execution-trace nodes, every op names its kind, its per-GPU shape and the ops it
depends on; nothing here knows which scheme will lower it. Shapes are per GPU at the graph's TP
degree. A GEMM computes C[M, N] = A[M, K] x B[K, N] (B stored [N, K], as cuBLAS's NT layout);
its `a_gathered` input is the activation all GPUs assemble from their sequence shards (sequence
parallelism), and `out_partial` output is a partial sum that must be reduced across GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Union

from harness.workload.models import ELEM_BYTES


@dataclass(frozen=True)
class Gemm:
    name: str
    M: int
    N: int
    K: int
    deps: tuple[str, ...] = ()
    a_gathered: bool = False   # A's rows are sharded over the GPUs and gathered before (or while) use
    out_partial: bool = False  # every GPU holds a partial sum of C: a reduction follows
    wgrad: bool = False        # weight gradient (outside the sub-layers, inside end-to-end time)
    sharded: str = "N"         # the dimension tensor parallelism divides by N: M, N or K

    @property
    def flops(self) -> int:
        return 2 * self.M * self.N * self.K


@dataclass(frozen=True)
class Norm:
    """LayerNorm (with the residual add and dropout fused) over `rows` x `cols`; backward too."""
    name: str
    rows: int
    cols: int
    deps: tuple[str, ...] = ()
    backward: bool = False


@dataclass(frozen=True)
class Attention:
    """Causal fused attention over `batch_heads` (batch x heads on this GPU) of seq x head_dim."""
    name: str
    batch_heads: int
    seq: int
    head_dim: int
    deps: tuple[str, ...] = ()
    backward: bool = False


@dataclass(frozen=True)
class Collective:
    """all_reduce | reduce_scatter | all_gather of a [rows, cols] activation (rows = all tokens)."""
    name: str
    kind: str
    rows: int
    cols: int
    deps: tuple[str, ...] = ()
    data: str = ""
    """The op whose output it reduces or gathers when that is not its first dependency: a
    backward re-gather gathers the saved forward LN output, and its dependency only places it
    in the backward pass (spec A5)."""

    @property
    def bytes(self) -> int:
        """D: bytes of the whole (unsharded) tensor."""
        return self.rows * self.cols * ELEM_BYTES

    @property
    def source(self) -> str | None:
        """The op whose output it reduces or gathers (None: the layer's input)."""
        return self.data or (self.deps[0] if self.deps else None)


Op = Union[Gemm, Norm, Attention, Collective]
COLLECTIVE_KINDS = ("all_reduce", "reduce_scatter", "all_gather")


@dataclass
class Graph:
    """Ops in a valid execution order (every op after its dependencies)."""
    name: str
    gpus: int
    partition: str                 # tp | sp
    ops: list[Op] = field(default_factory=list)
    sublayers: dict[str, tuple[str, str]] = field(default_factory=dict)  # L1 -> (producer, consumer)

    def add(self, op: Op) -> Op:
        known = {o.name for o in self.ops}
        if op.name in known:
            raise ValueError(f"duplicate op name '{op.name}'")
        data = (op.data,) if isinstance(op, Collective) and op.data else ()
        missing = [d for d in (*op.deps, *data) if d not in known]
        if missing:
            raise ValueError(f"op '{op.name}' depends on unknown ops {missing}")
        if isinstance(op, Collective) and op.kind not in COLLECTIVE_KINDS:
            raise ValueError(f"collective '{op.name}': unknown kind '{op.kind}'")
        self.ops.append(op)
        return op

    def op(self, name: str) -> Op:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(name)

    def consumers(self, name: str) -> list[Op]:
        return [o for o in self.ops if name in o.deps]

    def gemm_flops(self) -> int:
        return sum(o.flops for o in self.ops if isinstance(o, Gemm))
