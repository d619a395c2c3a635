"""What every scheme's lowering shares: the workload builder, one buffer per tensor, weights,
and the kernels of ops a scheme does not change (LN, attention, plain GEMMs), plus the record of
which launches implement which op (for per-op and sub-layer times).

Tensors: the output of every op is a buffer named after the op. A GEMM reads its A operand from
its first dependency's tensor (a fresh input buffer when it has none) and its own weights; a
partial GEMM output that a collective reduces is a multicast object (NVLS needs one; plain
kernels use it as ordinary memory).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness import functional_check
from harness.errors import ConfigError
from harness.kernels import gemm as gemm_kernel
from harness.kernels import layer_ops, nvls
from harness.kernels.builder import Stream, WorkloadBuilder
from harness.workload.graph import Attention, Collective, Gemm, Graph, Norm, Op
from harness.workload.models import ELEM_BYTES as ELEM


@dataclass(frozen=True)
class Target:
    """What the lowering may assume of the system."""
    gpus: int
    num_sms: int
    functional: bool = False


@dataclass
class Lowered:
    workload: object                                   # isa.Workload
    op_launches: dict[str, list[int]] = field(default_factory=dict)
    expectations: dict[str, functional_check.Expectation | None] = field(default_factory=dict)
    """Per collective (and any op a lowering describes), what a functional run leaves in its
    result buffer (None: no buffer holds it)."""


class Lowering:
    def __init__(self, graph: Graph, target: Target, scheme: str):
        self.g, self.t, self.scheme = graph, target, scheme
        self.b = WorkloadBuilder(f"{scheme}.{graph.name}", target.gpus, target.num_sms, target.functional)
        self.main = self.b.stream("main")
        self.tensors: dict[str, int] = {}
        self.op_launches: dict[str, list[int]] = {}
        self.expectations: dict[str, functional_check.Expectation | None] = {}

    def require_whole_tiles(self, rows: int, tile: int, what: str) -> None:
        """A scheme that moves each GPU's rows in whole tiles refuses a shard that is not (the
        edge tiles other schemes clip); one line naming the model, as a user sees the cause."""
        if rows % tile:
            raise ConfigError("model", f"scheme '{self.scheme}' moves {what} in whole {tile}-row tiles, but tokens / "
                              f"GPUs gives {rows} rows per GPU (system.gpus={self.t.gpus}); allowed: a model and GPU "
                              f"count with a multiple of {tile} rows per GPU")

    # ---- tensors
    def tensor(self, name: str, nbytes: int, multicast: bool = False) -> int:
        if name not in self.tensors:
            self.tensors[name] = self.b.buffer(name, nbytes, multicast=multicast)
        return self.tensors[name]

    def input_of(self, op: Op, nbytes: int) -> int:
        """The tensor op reads: its first dependency's output, or the layer's input."""
        if op.deps:
            return self.tensors[op.deps[0]]
        return self.tensor(f"{op.name}.in", nbytes)

    def shard_of(self, ag: Collective) -> int:
        """The buffer holding this GPU's rows of the tensor an AllGather assembles: its source's
        output (Collective.source), or a fresh input shard."""
        if ag.source:
            return self.tensors[ag.source]
        return self.tensor(f"{ag.name}.in", ag.bytes // self.t.gpus)

    def out_of(self, op: Op) -> int:
        if isinstance(op, Gemm):
            return self.tensor(op.name, op.M * op.N * ELEM, multicast=op.out_partial)
        if isinstance(op, Norm):
            return self.tensor(op.name, op.rows * op.cols * ELEM)
        if isinstance(op, Collective):
            size = op.bytes // self.t.gpus if op.kind == "reduce_scatter" else op.bytes
            return self.tensor(op.name, size, multicast=op.kind != "reduce_scatter")
        raise TypeError(op)

    # ---- launches
    def launch(self, op: Op | str, kernel: int, stream: Stream | None = None, **kw) -> int:
        li = self.b.launch(kernel, stream or self.main, **kw)
        self.op_launches.setdefault(op if isinstance(op, str) else op.name, []).append(li)
        return li

    def expect(self, op: str, expectation: functional_check.Expectation | None) -> None:
        """What op `op` leaves in a functional run: a collective whose kind's rule does not say it,
        or another op that moves values between GPUs (None: nothing to check, e.g. a scheme that
        needs no collective there)."""
        self.expectations[op] = expectation

    def finish(self) -> Lowered:
        names = {i: b.name for i, b in enumerate(self.b.wl.buffers)}
        elements = {b.name: b.bytes // ELEM for b in self.b.wl.buffers}
        expect = dict(self.expectations)
        for op in self.g.ops:
            if isinstance(op, Collective) and op.name not in expect:
                expect[op.name] = functional_check.default_expectation(op, elements, self.tensors, names, self.t.gpus)
        return Lowered(self.b.wl, self.op_launches, expect)

    # ---- ops no scheme changes
    def gemm(self, op: Gemm, stream: Stream | None = None, *, source=gemm_kernel.Source(),
             sink=gemm_kernel.Sink(), signal=None, a: int | None = None, out: int | None = None, config=None,
             shard=None, wait=None, name: str | None = None, rows: int | None = None, **kw) -> int:
        """rows: compute only this many rows of C (a row chunk; `shard` places it)."""
        if a is None:  # a weight gradient's A is a saved forward activation (transposed), not its dep's tensor
            a = self.tensor(f"{op.name}.saved_act", op.M * op.K * ELEM) if op.wgrad else self.input_of(op, op.M * op.K * ELEM)
        w = self.tensor(f"{op.name}.w", op.N * op.K * ELEM)
        out = self.out_of(op) if out is None else out
        M = rows or (shard[0] if shard else op.M)
        ki, _ = gemm_kernel.gemm(self.b, name or op.name, M, op.N, op.K, a=a, w=w, out=out, source=source, sink=sink,
                                 signal=signal, config=config, shard=shard, wait=wait)
        return self.launch(op, ki, stream, **kw)

    def norm(self, op: Norm, stream: Stream | None = None, *, x_gpu_offset: int = 0, **kw) -> int:
        """x_gpu_offset: the input is a full-size buffer in which GPU g's rows start at g * offset."""
        nbytes = op.rows * op.cols * ELEM
        x = self.input_of(op, nbytes)
        gamma = self.tensor(f"{op.name}.gamma", op.cols * ELEM)
        beta = self.tensor(f"{op.name}.beta", op.cols * ELEM)
        if op.backward:  # x is the saved forward input, dy the incoming gradient
            dy, x = x, self.tensor(f"{op.name}.saved_x", nbytes)
        else:
            dy = None
        ki = layer_ops.layernorm(self.b, op.name, op.rows, op.cols, x=x, y=self.out_of(op), gamma=gamma, beta=beta,
                                 dy=dy, x_gpu_offset=x_gpu_offset if dy is None else 0)
        return self.launch(op, ki, stream, **kw)

    def attention(self, op: Attention, stream: Stream | None = None, **kw) -> int:
        q, kv, o = layer_ops.attention_buffers(self.b, op.name, op.batch_heads, op.seq, op.head_dim, op.backward)
        self.tensors[op.name] = o
        ki = layer_ops.attention(self.b, op.name, op.batch_heads, op.seq, op.head_dim, q=q, kv=kv, o=o,
                                 backward=op.backward)
        return self.launch(op, ki, stream, **kw)

    def nvls(self, op: Collective, cfg: nvls.NvlsConfig, stream: Stream | None = None, **kw) -> int:
        """A whole-tensor NVLS collective: AR in place on its input's multicast buffer; RS from
        the input's multicast buffer to a shard; AG from the input shard into a multicast buffer."""
        src = self.tensors[op.source]
        if op.kind == "all_reduce":
            self.tensors[op.name] = src
            ki = nvls.collective(self.b, op.name, op.kind, op.bytes, tensor=src, cfg=cfg)
        elif op.kind == "reduce_scatter":
            ki = nvls.collective(self.b, op.name, op.kind, op.bytes, tensor=src, shard=self.out_of(op), cfg=cfg)
        else:
            ki = nvls.collective(self.b, op.name, op.kind, op.bytes, tensor=self.out_of(op), shard=src, cfg=cfg)
        return self.launch(op, ki, stream, **kw)

    def plain(self, op: Op, stream: Stream | None = None, **kw) -> int:
        """The kernel of a compute op as-is (its launch follows the stream's order)."""
        if isinstance(op, Gemm):
            return self.gemm(op, stream, **kw)
        if isinstance(op, Norm):
            return self.norm(op, stream, **kw)
        if isinstance(op, Attention):
            return self.attention(op, stream, **kw)
        raise TypeError(f"{op.name}: not a compute op")
