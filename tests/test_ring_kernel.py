"""The ring kernel (harness/kernels/ring.py) cuts a step as NCCL's Simple protocol does, and the
cut (a first slice, a loop of middle ones, a shorter last one) still leaves exact values.

NCCL's genericOp (prims_simple.h) splits each chunk of a step (up to ALLREDUCE_CHUNKSTEPS = 4
buffer steps of 512 KiB: 2 MiB) into SlicePerChunk = 2 slices of at least a 32nd of a 1 MiB
slice, so a ring step of a few hundred KiB per channel is two slices, not one: the next GPU
starts on the first while the second is sent."""
from __future__ import annotations

import numpy as np
import pytest

from harness.gpu import functional
from harness.gpu.isa_text import isa
from harness.kernels import ring
from harness.kernels.builder import WorkloadBuilder, affine
from harness.system import run_system

from conftest import compose

MIB = 1 << 20


@pytest.mark.parametrize("part,slice_bytes", [
    (699136, 349568),          # 4 GPUs x 24 channels, 64 MiB: two slices, as NCCL (was one of 683 KiB)
    (1398144, 699136),         # 2 GPUs x 24 channels, 64 MiB: two (was one of 1.33 MiB, above the 1 MiB cap)
    (2 * MIB, MIB),            # a whole chunk: two slices of 1 MiB
    (40 * 1024, 32 * 1024),    # below two minimum slices: 32 KiB, then the rest
    (4096, 4096),              # below one minimum slice: one slice
    (5 * MIB, MIB),            # more than a chunk: 1 MiB slices
])
def test_a_step_is_cut_into_nccls_slices(part, slice_bytes):
    assert ring.slice_size(part) == slice_bytes
    assert ring.slice_size(part) % 128 == 0


def test_a_64_mib_allreduce_on_4_gpus_signals_two_slices_per_step():
    b = WorkloadBuilder("ar", 4, 132)
    nbytes = 24 * 4 * 699136
    ring.collective(b, "ar", "all_reduce", nbytes, data=b.buffer("y", nbytes), cfg=ring.RingConfig(channels=24))
    flags = next(buf for buf in b.wl.buffers if buf.name == "ar.flags")
    assert flags.bytes == 8 * 24 * 2 * (4 - 1) * 2  # channels x steps x slices


G = 4


def _ring_values(kind: str, part: int, slice_bytes: int):
    """Every GPU fills its buffer with g + 1, then runs the ring; the per-GPU summaries."""
    C = 2
    nbytes = C * G * part
    b = WorkloadBuilder(f"ring_{kind}", G, 132, functional=True)
    data = b.buffer("data", nbytes)
    fk, p = b.kernel("fill", C, 1, threads=128)
    if kind == "all_gather":  # only its own part: the others are the peers' to write, maybe before this fill
        p.ins(isa.ST, buffer=data, addr=ring.part_addr(affine(0, bx=nbytes // C), part, G, 1), rows=1, row_bytes=part)
    else:
        p.ins(isa.ST, buffer=data, addr=affine(0, bx=nbytes // C), rows=1, row_bytes=nbytes // C)
    fill = b.launch(fk, b.stream("s"))
    rk = ring.collective(b, "ring", kind, nbytes, data=data, cfg=ring.RingConfig(channels=C, threads=128,
                                                                               slice_bytes=slice_bytes))
    b.launch(rk, b.stream("s"), after=(fill,))
    cfg = compose("system=hgx_h200_4gpu", "system.gpu_model=hopper", "net.functional=true")
    res = run_system(cfg, workload=b.wl.SerializeToString())
    return dict(zip(res.stats["name"], res.stats["value"])), C


def _expected(kind: str, g: int, part: int, C: int) -> np.ndarray:
    """Contents of GPU g after the ring (bf16: part / 2 elements per part): the fill wrote g + 1
    where the ring's result does not overwrite it, so ring.functional_result says it all."""
    return ring.functional_result(kind, g, G, C, C * G * part)


@pytest.mark.parametrize("kind", ring.KINDS)
@pytest.mark.parametrize("part", [128, 6 * 1024, 10 * 1024])  # 1 slice; 2 of 3 KiB; 3 with a 2 KiB last
def test_every_cut_of_a_step_leaves_exact_values(engines, kind, part):
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    stats, C = _ring_values(kind, part, slice_bytes=4096)  # slices of 4 KiB, at least 128 B
    for g in range(G):
        want = functional.summary(_expected(kind, g, part, C))
        assert functional.engine_summary(stats, g, "data") == want, f"{kind} gpu{g}"


@pytest.mark.parametrize("kind", ring.KINDS)
def test_a_slice_of_many_rounds_leaves_exact_values(engines, kind):
    """A 168 KiB part in two 84 KiB slices, each walked by the channel's 4 warps in rounds of 32
    threads x 8 x 16 B = 4 KiB (NCCL's unroll): 21 rounds, warp 0 taking 6 (a first, a loop of
    five), the others 5, none of them the same as another's."""
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    part = 172032
    assert ring.slice_size(part, 98304) == 86016 and 86016 // (32 * ring.PIECE_BYTES_PER_THREAD) == 21
    stats, C = _ring_values(kind, part, slice_bytes=98304)
    for g in range(G):
        assert functional.engine_summary(stats, g, "data") == functional.summary(_expected(kind, g, part, C)), g


@pytest.mark.parametrize("kind,parts_stored", [("all_reduce", G), ("all_gather", G), ("reduce_scatter", 1)])
def test_each_gpu_stores_into_its_output_what_nccls_out_of_place_ring_writes(engines, kind, parts_stored):
    """Local stores of one GPU, in parts of a channel (the remote stores into the next GPU's receive
    slots are not local): all_reduce and all_gather write every one of the G parts of the output
    once (the all_gather's own part by its first step, NCCL's copySend when input and output
    differ, as nccl-tests and all_gather_into_tensor call it; then the G - 2 parts it forwards and
    the last one it copies out), reduce_scatter only its own reduced part."""
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    C, part = 2, 6 * 1024
    nbytes = C * G * part
    b = WorkloadBuilder(f"ring_{kind}", G, 132)
    rk = ring.collective(b, "ring", kind, nbytes, data=b.buffer("data", nbytes),
                         cfg=ring.RingConfig(channels=C, threads=128, slice_bytes=4096))
    b.launch(rk, b.stream("s"))
    res = run_system(compose("system=hgx_h200_4gpu", "system.gpu_model=hopper"), workload=b.wl.SerializeToString())
    stats = dict(zip(res.stats["name"], res.stats["value"]))
    for g in range(G):
        assert stats[f"gpu{g}.local.st_bytes"] == parts_stored * C * part, f"{kind} gpu{g}"
