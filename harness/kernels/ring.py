"""NCCL's ring (Simple protocol) as tile-ISA kernels: `channels` CTAs, each owning a contiguous
region of the tensor; a region's N parts travel around the ring g -> g+1, slice by slice.

The ranks are connected as NCCL connects one process per GPU (the P2P transport over CUDA IPC /
cuMem handles, not direct pointers): every slice lands in the next GPU's receive buffer, never
in its tensor, and the receiver copies it out (NCCL's primitives in prims_simple.h; all_reduce.h,
all_gather.h, reduce_scatter.h, runRing).

AllReduce of a region (N parts of P bytes; part k at offset k P; each part cut into slices):
  step 0      send part g to the next GPU (a remote store into its receive slot 0);
  step s      (1 .. N-1) wait for the previous GPU's partial of part g - s (slot s-1), add the
              local part g - s (recvReduceSend: the sum goes on from registers): steps 1 .. N-2
              send it into the next GPU's slot s; step N-1 has the full sum of part g + 1, stores
              it locally and sends it into the next GPU's slot N-1 (recvReduceCopySend);
  gather t    (1 .. N-2) wait for part g - t + 1 in slot N-2+t, store it locally and send it on
              into the next GPU's slot N-1+t (recvCopySend: two stores);
  finally     wait for the last part, g + 2, and copy it from slot 2N-3 into the tensor (recv).
ReduceScatter is steps 0 .. N-1 (GPU g ends with the sum of part g + 1); AllGather copies part
g + 1 into place and sends it into slot 0 (copySend: NCCL's out-of-place all_gather, as
nccl-tests and torch's all_gather_into_tensor call it, copies its input into the output; here the
input is the output's own part, so the copy stores the bytes it loaded where they were) and
forwards the others as the gather above. A channel's warps walk each slice
independently, as NCCL's reduceCopyPacks hands each warp its own hunks: the CTA is one warp
group per warp (isa.proto Kernel.warp_groups), and warp w moves pieces w, w + W, ... of the slice
in rounds of 32 threads x 128 B (its loads in flight): a round's loads, add and stores follow
each other, the stores are posted (WAIT scope=LOCAL waits for the loads only) and the next
round's loads go out behind them. At the slice's end each warp waits for its stores'
acknowledgements and adds 1 to the slice's flag on the next GPU (NCCL's fence before the tail
flag; there one thread posts it after a barrier), and the next GPU's warps wait for all W.
Receive slots and flags are distinct per (chunk, channel, step, slice). In functional runs the
values travel through tile registers, so the sums are checked exactly. Per GPU the data sent is
NCCL's: (N-1)/N of the tensor per half.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from harness.gpu.isa_text import isa
from harness.kernels.builder import Program, WorkloadBuilder, affine, rotated

KINDS = ("all_reduce", "reduce_scatter", "all_gather")
# NCCL's Simple protocol (prims_simple.h, genericOp; all_reduce.h and friends) moves a ring step
# in chunks of ALLREDUCE_CHUNKSTEPS = 4 of its NCCL_STEPS = 8 buffer steps of a 4 MiB buffer
# (2 MiB), each cut into SlicePerChunk = 2 slices: sliceSize = max(divUp(nelem, 2), stepSize x
# StepPerSlice / 32), so a step smaller than a chunk is still two slices (of at least 32 KiB), and
# the next GPU starts on the first while the second is sent. The all_gather and reduce_scatter
# constants are the same.
SLICE_BYTES = 1 << 20
SLICES_PER_CHUNK = 2
R_RECV, R_LOCAL = 1, 2  # tile registers
# Bytes one thread has in flight per round: NCCL's Simple primitives load 16 B vectors unrolled
# COLL_UNROLL deep (reduceCopyPacks), and ncclCollUnroll() is 8 on sm_80 and later (device.h, since
# NCCL 2.17), so each warp streams its hunks in rounds of 4 KiB (64 KiB per 512-thread channel).
PIECE_BYTES_PER_THREAD = 8 * 16


@dataclass(frozen=True)
class RingConfig:
    channels: int = 16
    threads: int = 512
    slice_bytes: int = SLICE_BYTES

    @property
    def warps(self) -> int:
        """The channel's warp groups: NCCL's warps walk a slice independently (reduceCopyPacks),
        and each raises the slice's flag once."""
        return max(1, self.threads // 32)


def part_addr(base, part_bytes: int, gpus: int, shift: int):
    """base + ((g + shift) mod gpus) * part_bytes."""
    return rotated(base, part_bytes, gpus, shift)


def slice_size(part: int, max_slice: int = SLICE_BYTES) -> int:
    """Bytes per slice of a ring step of `part` bytes, in whole 128 B lines, as NCCL cuts it: a part
    of up to a chunk (SLICES_PER_CHUNK slices of `max_slice`) is SLICES_PER_CHUNK slices of at least
    max_slice / 32; a larger part goes in slices of `max_slice` (NCCL loops over whole chunks; the
    last, shorter slice stands for its last loop's smaller ones)."""
    if part > SLICES_PER_CHUNK * max_slice:
        return max_slice
    lines = -(-part // 128)
    slice_lines = max(-(-lines // SLICES_PER_CHUNK), -(-(max_slice // 32) // 128))
    return min(part, slice_lines * 128)


@dataclass(frozen=True)
class _Piece:
    """A part of one slice that a channel's threads move as one round: loads in flight
    together, then the add and the (posted) store, as NCCL's primitives stream a slice."""
    shift: int       # slice: 0 the peeled first, 1 inside the slice loop (L1 + 1), S - 1 the peeled last
    first: int       # byte offset of the piece within its slice (without its loop counter)
    size: int
    in_loop: bool    # inside the slice loop (loop counter L1 = slice)
    step: int = 0    # bytes per iteration of the piece loop around it (0: none)
    head: bool = False  # the slice's first piece: waits for the slice's flag

    def loops(self, outer: int, per_slice: int) -> tuple[int, ...]:
        t = (outer,) + ((per_slice,) if self.in_loop else ())
        return t + ((self.step,) if self.step else ())


class _Ring:
    """Emits one channel's ring steps over one chunk (loop L0 = chunk, L1 = slice, then the
    pieces of a slice)."""

    def __init__(self, p: Program, *, data: int, recv: int, flags: int, gpus: int, channels: int, chunk: int,
                 part: int, slice_bytes: int, recv_steps: int, piece_bytes: int, group: int = 0, groups: int = 1):
        self.w, self.W = group, groups
        self.p, self.data, self.recv, self.flags, self.G = p, data, recv, flags, gpus
        self.chunk, self.part, self.slice = chunk, part, slice_bytes
        self.S = -(-part // slice_bytes)
        self.last = part - (self.S - 1) * slice_bytes  # the last slice may be shorter
        self.region = chunk // channels
        self.recv_steps = recv_steps
        self.nxt = affine(1, g=1, mod=gpus)
        self.n_flags = 2 * (gpus - 1)
        self.C = channels
        self.piece = max(128, piece_bytes // 128 * 128)

    # addresses of piece `pc` of slice (L1 + shift) of ...
    def data_part(self, k_shift: int, pc: _Piece):
        base = affine(pc.shift * self.slice + pc.first, bx=self.region, loops=pc.loops(self.chunk, self.slice))
        return part_addr(base, self.part, self.G, k_shift)

    def slot(self, step: int, pc: _Piece):
        n = self.recv_steps
        return affine(step * self.part + pc.shift * self.slice + pc.first, bx=n * self.part,
                      loops=pc.loops(self.C * n * self.part, self.slice))

    def flag(self, index: int, shift: int, in_loop: bool):
        n, S = self.n_flags, self.S
        return affine(8 * (index * S + shift), bx=8 * n * S, loops=(8 * self.C * n * S,) + ((8,) if in_loop else ()))

    def wait(self, index: int, pc: _Piece):  # every sending group adds 1 once its part has landed
        self.p.ins(isa.FLAG_WAIT, buffer=self.flags, addr=self.flag(index, pc.shift, pc.in_loop), value=self.W)

    def signal(self, index: int, shift: int, in_loop: bool):
        self.p.ins(isa.FLAG_SIGNAL, buffer=self.flags, addr=self.flag(index, shift, in_loop), value=1,
                   scope=isa.REMOTE, peer=self.nxt)

    def load(self, buf: int, addr, reg: int, size: int):
        self.p.ins(isa.LD, buffer=buf, addr=addr, rows=1, row_bytes=size, reg=reg, is_async=True)

    def send(self, buf: int, addr, size: int, reg: int = R_RECV):
        self.p.ins(isa.ST_REMOTE, buffer=buf, addr=addr, peer=self.nxt, rows=1, row_bytes=size, reg=reg,
                   is_async=True)

    def group_slice(self, body, shift: int, in_loop: bool, length: int, signal_index) -> None:
        """Warp group w's rounds of one slice (NCCL's warps each walk their own hunks of a slice,
        reduceCopyPacks): pieces w, w + W, ... of `piece` bytes, the short tail to the group whose
        turn it is; then its stores are acknowledged and it adds 1 to the slice's flag."""
        p, W, w = self.p, self.W, self.w
        b = min(self.piece, length)
        full, tail = length // b, length % b
        mine = len(range(w, full, W))
        if mine:
            body(_Piece(shift, w * b, b, in_loop, head=True))
        if mine > 1:
            p.loop(mine - 1)
            body(_Piece(shift, (w + W) * b, b, in_loop, step=W * b))
            p.end()
        if tail and full % W == w:
            body(_Piece(shift, full * b, tail, in_loop, head=not mine))
        if signal_index is not None:
            p.ins(isa.WAIT, count=0)
            self.signal(signal_index, shift, in_loop)

    def step(self, body, signal_index: int | None) -> None:
        """Every slice of one step (the first, a loop over the middle ones, the last, which may be
        shorter), each ending with its stores acknowledged and its flag raised (NCCL's fence
        before the tail flag)."""
        p, S = self.p, self.S
        self.group_slice(body, 0, False, self.slice if S > 1 else self.part, signal_index)
        if S > 2:
            p.loop(S - 2)
            self.group_slice(body, 1, True, self.slice, signal_index)
            p.end()
        if S > 1:
            self.group_slice(body, S - 1, False, self.last, signal_index)

    def emit(self, kind: str) -> None:
        G, p = self.G, self.p
        ag0 = G - 1  # flag index of the gather's first step

        def after_loads():  # the loads are in registers; posted stores stay in flight
            p.ins(isa.WAIT, scope=isa.LOCAL)

        if kind in ("all_reduce", "reduce_scatter"):
            def first(pc):
                self.load(self.data, self.data_part(0, pc), R_RECV, pc.size)
                after_loads()
                self.send(self.recv, self.slot(0, pc), pc.size)
            self.step(first, 0)
            for s in range(1, G):
                last = s == G - 1
                target = (ag0 if kind == "all_reduce" else None) if last else s

                def reduce(pc, s=s, last=last):
                    if pc.head:
                        self.wait(s - 1, pc)
                    self.load(self.recv, self.slot(s - 1, pc), R_RECV, pc.size)
                    self.load(self.data, self.data_part(-s, pc), R_LOCAL, pc.size)
                    after_loads()
                    p.ins(isa.ALU, elements=pc.size // 2, flops_per_element=1.0, reg=R_RECV, src_reg=R_LOCAL)
                    if not last:
                        self.send(self.recv, self.slot(s, pc), pc.size)
                        return
                    self.store(self.data_part(1, pc), pc.size)
                    if kind == "all_reduce":
                        self.send(self.recv, self.slot(G - 1, pc), pc.size)
                self.step(reduce, target)
            if kind == "reduce_scatter":
                return
            gather = G - 1  # the gather's first receive slot
        else:
            def gather0(pc):  # copySend: NCCL's out-of-place all_gather also copies its input into the output
                self.load(self.data, self.data_part(1, pc), R_RECV, pc.size)
                after_loads()
                self.store(self.data_part(1, pc), pc.size)
                self.send(self.recv, self.slot(0, pc), pc.size)
            self.step(gather0, ag0)
            gather = 0
        for t in range(1, G - 1):
            def forward(pc, t=t):
                if pc.head:
                    self.wait(ag0 + t - 1, pc)
                self.load(self.recv, self.slot(gather + t - 1, pc), R_RECV, pc.size)
                after_loads()
                self.store(self.data_part(1 - t, pc), pc.size)
                self.send(self.recv, self.slot(gather + t, pc), pc.size)
            self.step(forward, ag0 + t)

        def receive(pc):  # the last part, g + 2, from the previous GPU's receive slot
            if pc.head:
                self.wait(ag0 + G - 2, pc)
            self.load(self.recv, self.slot(gather + G - 2, pc), R_RECV, pc.size)
            after_loads()
            self.store(self.data_part(2 - G, pc), pc.size)
        self.step(receive, None)

    def store(self, addr, size: int) -> None:
        """A posted local store of the round's registers into the tensor."""
        self.p.ins(isa.ST, buffer=self.data, addr=addr, rows=1, row_bytes=size, reg=R_RECV, is_async=True)


def collective(b: WorkloadBuilder, name: str, kind: str, nbytes: int, *, data: int,
               cfg: RingConfig = RingConfig(), chunks: int = 1, wait=None) -> int:
    """A ring `kind` over `data` (nbytes per GPU, every GPU's full-size buffer; a reduce_scatter
    leaves GPU g's reduced part (g + 1) mod N in place, an all_gather sends part (g + 1) mod N).
    chunks > 1 splits the tensor into consecutive chunks walked in order (CoCoNet's chunked
    overlap); `wait(p)` emits what a channel waits for before a chunk."""
    if kind not in KINDS:
        raise ValueError(f"unknown ring collective '{kind}'")
    G, C = b.gpus, cfg.channels
    if nbytes % (chunks * C * G * 128):
        raise ValueError(f"{name}: {nbytes} B does not split into {chunks} chunks x {C} channels x {G} parts "
                         "of whole 128 B lines")
    chunk = nbytes // chunks
    part = chunk // C // G
    slice_bytes = slice_size(part, cfg.slice_bytes)
    S = -(-part // slice_bytes)
    recv_steps = 2 * (G - 1) if kind == "all_reduce" else G - 1
    recv = b.buffer(f"{name}.recv", chunks * C * recv_steps * part)
    flags = b.flags(f"{name}.flags", chunks * C * 2 * (G - 1) * S)
    ki, p = b.kernel(name, C, 1, threads=cfg.threads, regs=64, loads_via_l1=True)
    W = cfg.warps
    for w in range(W):
        if W > 1:
            p = Program(b.wl.kernels[ki], f"warps{w}", cfg.threads // 32 // W)
        p.loop(chunks)
        if wait is not None:
            wait(p)
        _Ring(p, data=data, recv=recv, flags=flags, gpus=G, channels=C, chunk=chunk, part=part,
              slice_bytes=slice_bytes, recv_steps=recv_steps,
              piece_bytes=cfg.threads // W * PIECE_BYTES_PER_THREAD, group=w, groups=W).emit(kind)
        p.end()
    return ki


def functional_result(kind: str, gpu: int, gpus: int, channels: int, nbytes: int, chunks: int = 1,
                      elem_bytes: int = 2):
    """What `data` holds on `gpu` after the ring in a functional run whose every GPU started it at
    rank + 1 (Buffer.init_rank): [chunk, channel, part, element] flattened. all_reduce: the sum
    everywhere; reduce_scatter: GPU g's reduced part is g + 1, the rest keeps g + 1 (the partial
    sums travel through receive buffers); all_gather: part k is GPU k - 1's."""
    part = nbytes // chunks // channels // gpus
    v = np.full((chunks, channels, gpus, part // elem_bytes), float(gpu + 1))
    total = float(gpus * (gpus + 1) // 2)
    if kind == "all_reduce":
        v[:] = total
    elif kind == "reduce_scatter":
        v[:, :, (gpu + 1) % gpus] = total
    else:
        for k in range(gpus):
            v[:, :, k] = (k - 1) % gpus + 1
    return v.ravel()


def steps_of(kind: str, gpus: int) -> int:
    return (2 if kind == "all_reduce" else 1) * (gpus - 1)
