"""Building a multi-GPU tile-ISA workload (proto/isa.proto): buffers on the symmetric heap,
kernels, and launches with streams, priorities, SM partitions and dependencies.

Every launch runs on every GPU of the workload (the same program, SPMD); a kernel's addresses may
depend on the GPU id. Launch indices are shared by all GPUs, so `after` and TB dependencies name
launches of the same GPU; readiness across GPUs is expressed with flags (FLAG_SIGNAL to a peer,
FLAG_WAIT locally), as NCCL and the fused kernels do on real GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from harness.gpu.isa_text import isa
from harness.gpu.kernels import Program, affine  # noqa: F401  (re-exported for kernel modules)


def rotated(base, part_bytes: int, gpus: int, shift: int):
    """A copy of affine `base` plus ((g + shift) mod gpus) * part_bytes: the part of a ring step
    on GPU g (the modulo as a quotient term, so the rest of the address keeps its own terms)."""
    a = isa.Affine()
    a.CopyFrom(base)
    k = shift % gpus + gpus
    a.base += k * part_bytes
    a.gpu += part_bytes
    a.quotient.add(base=k, gpu=1, divisor=gpus, scale=-gpus * part_bytes)
    return a


@dataclass
class Stream:
    """A CUDA-stream-like queue of launches; its last launch orders the next."""
    index: int
    priority: int = 0
    sm_first: int = 0
    sm_count: int = 0  # 0: every SM


@dataclass
class WorkloadBuilder:
    name: str
    gpus: int
    num_sms: int
    functional: bool = False
    wl: object = None
    _flags: int = 0
    streams: dict[str, Stream] = field(default_factory=dict)

    def __post_init__(self):
        self.wl = isa.Workload(name=self.name, num_gpus=self.gpus, functional=self.functional)

    # ---- memory
    def buffer(self, name: str, nbytes: int, *, multicast: bool = False, dtype=isa.BF16, init_rank: bool = False) -> int:
        """init_rank: a functional run starts every element at the GPU's rank + 1 (isa.proto)."""
        if any(b.name == name for b in self.wl.buffers):
            raise ValueError(f"buffer '{name}' defined twice")
        self.wl.buffers.add(name=name, bytes=max(int(nbytes), 8), dtype=dtype, multicast=multicast, init_rank=init_rank)
        return len(self.wl.buffers) - 1

    def flags(self, name: str, count: int) -> int:
        """A buffer of `count` 8-byte flags (counters) on every GPU."""
        return self.buffer(name, 8 * max(count, 1), dtype=isa.FP32)

    def buffer_index(self, name: str) -> int:
        for i, b in enumerate(self.wl.buffers):
            if b.name == name:
                return i
        raise KeyError(name)

    # ---- kernels and launches
    def kernel(self, name: str, grid_x: int, grid_y: int = 1, *, threads: int = 256, regs: int = 32,
               smem: int = 0, persistent: bool = False, cluster_ctas: int = 0, loads_via_l1: bool = False,
               holds_carveout: bool = False):
        """loads_via_l1: its local loads go into registers through L1 (LDG, NCCL's and the
        LayerNorm's), not by TMA into shared memory; holds_carveout: a cuBLAS GEMM (isa.proto)."""
        k = self.wl.kernels.add(name=name, grid_x=max(1, grid_x), grid_y=max(1, grid_y), threads_per_block=threads,
                                regs_per_thread=regs, smem_bytes=smem, persistent=persistent,
                                cluster_ctas=cluster_ctas, loads_via_l1=loads_via_l1, holds_carveout=holds_carveout)
        return len(self.wl.kernels) - 1, Program(k)

    def stream(self, name: str, priority: int = 0, sm_first: int = 0, sm_count: int = 0) -> Stream:
        if name not in self.streams:
            self.streams[name] = Stream(len(self.streams), priority, sm_first, sm_count)
        return self.streams[name]

    def launch(self, kernel: int, stream: Stream, *, after: tuple[int, ...] = (), deps: tuple = ()) -> int:
        """Launch `kernel` on every GPU on `stream`, after the launches `after` (any stream) and
        with TB-level dependencies `deps` (dicts of isa.TbDependency fields)."""
        la = self.wl.launches.add(kernel=kernel, stream=stream.index, priority=stream.priority,
                                  sm_first=stream.sm_first, sm_count=stream.sm_count)
        la.after.extend(sorted(set(after)))
        for d in deps:
            la.deps.add(**d)
        return len(self.wl.launches) - 1

    def kernel_name(self, launch: int) -> str:
        return self.wl.kernels[self.wl.launches[launch].kernel].name
