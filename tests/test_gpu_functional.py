"""Functional data path of the Hopper engine through the harness: an 8-GPU NVLS AllReduce with
tile registers (multimem.ld_reduce into a register, multimem.st from it) on dgx_h100 leaves
every GPU's buffer equal to numpy's sum, compared through the gpuN.mem.<buffer>.* statistics."""
from __future__ import annotations

import numpy as np
import pytest

from harness.gpu import functional, isa_text
from harness.system import run_system

from conftest import compose

G, SLOT = 8, 512  # GPUs; bytes of the slot each GPU marks with its own value

SRC = f"""
.workload nvls_all_reduce gpus={G} functional
.buffer MC bytes={2 * G * SLOT} dtype=fp32 multicast
.buffer F bytes=64 dtype=fp32
.kernel init grid=1x1 threads=128
  st buf=MC addr=[0] rows=1 row_bytes={2 * G * SLOT}          ; MC = rank + 1
  st buf=MC addr=[{SLOT}*g] rows=1 row_bytes={SLOT} value=7   ; but 7 in slot `rank`
""" + "".join(f"  flag.signal buf=F addr=[0] value=1 scope=remote peer=[g + {d} % {G}]\n" for d in range(1, G)) + f"""
.end
.kernel all_reduce grid=4x1 threads=128
  flag.wait buf=F addr=[0] value={G - 1}                          ; every GPU's init is done
  multimem.ld_reduce buf=MC addr=[{2 * SLOT}*g + {SLOT // 2}*bx] rows=1 row_bytes={SLOT // 2} reg=1
  multimem.st buf=MC addr=[{2 * SLOT}*g + {SLOT // 2}*bx] rows=1 row_bytes={SLOT // 2} reg=1
  bar
.end
.launch init
.launch all_reduce after=0
"""


def expected_contents() -> np.ndarray:
    per_gpu = np.repeat(np.arange(1, G + 1, dtype=np.float64)[:, None], 2 * G * SLOT // 4, axis=1)
    for g in range(G):
        per_gpu[g, g * SLOT // 4:(g + 1) * SLOT // 4] = 7.0
    return per_gpu.sum(axis=0)


def test_text_form_round_trips_the_register_operands():
    wl = isa_text.parse(SRC)
    assert isa_text.parse(isa_text.format(wl)) == wl
    ar = wl.kernels[1].program
    assert [(i.op, i.reg) for i in ar if i.reg] == [(isa_text.isa.MM_LD_REDUCE, 1), (isa_text.isa.MM_ST, 1)]


def test_summary_hash_sees_order_and_values():
    a = functional.summary([1.0, 2.0, 3.0])
    assert a["sum"] == 6.0 and a["min"] == 1.0 and a["max"] == 3.0
    assert functional.summary([2.0, 1.0, 3.0])["hash"] != a["hash"]
    assert functional.summary([-0.0, 1.0])["hash"] == functional.summary([0.0, 1.0])["hash"]
    assert 0 <= a["hash"] < 2.0 ** 52


def test_nvls_all_reduce_with_registers_equals_numpy(engines):
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.features=nvls", "net.functional=true")
    res = run_system(cfg, workload=isa_text.parse(SRC).SerializeToString())
    stats = dict(zip(res.stats["name"], res.stats["value"]))
    want = functional.summary(expected_contents())
    assert (want["min"], want["max"]) == (36 - 8 + 7, 36 - 1 + 7)  # slot g: 7 instead of g + 1
    for g in range(G):
        assert functional.engine_summary(stats, g, "MC") == want, f"gpu{g}"


# gpu.cache_remote_reads with values: 4 blocks of GPU g load GPU (g+1)'s marked row twice into
# registers (read-only remote loads: one fetch, three blocks joining it, then four L2 hits) and
# store each register into their own rows of OUT. Every row must hold the peer's values.
CACHED = f"""
.workload cached_remote_reads gpus={G} functional
.buffer X bytes=512 dtype=fp32
.buffer OUT bytes={8 * 512} dtype=fp32
.buffer F bytes=64 dtype=fp32
.kernel init grid=1x1 threads=128
  st buf=X addr=[0] rows=1 row_bytes=512 value=5   ; X = 5 on every GPU ...
  st buf=X addr=[256] rows=1 row_bytes=256         ; ... but its second half = rank + 1
""" + "".join(f"  flag.signal buf=F addr=[0] value=1 scope=remote peer=[g + {d} % {G}]\n" for d in range(1, G)) + f"""
.end
.kernel reads grid=4x1 threads=128
  flag.wait buf=F addr=[0] value={G - 1}
  ld.remote.nc buf=X addr=[0] rows=1 row_bytes=512 peer=[g + 1 % {G}] reg=1
  st buf=OUT addr=[512*bx] rows=1 row_bytes=512 reg=1
  ld.remote.nc buf=X addr=[0] rows=1 row_bytes=512 peer=[g + 1 % {G}] reg=2
  st buf=OUT addr=[2048 + 512*bx] rows=1 row_bytes=512 reg=2
.end
.launch init
.launch reads after=0
"""


@pytest.mark.parametrize("cache", [True, False])
def test_cached_remote_tiles_carry_the_peers_values(engines, cache):
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")
    wl = isa_text.parse(CACHED)
    assert isa_text.parse(isa_text.format(wl)) == wl and wl.kernels[1].program[1].read_only
    cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.functional=true",
                  f"gpu.cache_remote_reads={str(cache).lower()}")
    res = run_system(cfg, workload=wl.SerializeToString())
    stats = dict(zip(res.stats["name"], res.stats["value"]))
    for g in range(G):
        row = np.concatenate([np.full(64, 5.0), np.full(64, (g + 1) % G + 1.0)])
        assert functional.engine_summary(stats, g, "OUT") == functional.summary(np.tile(row, 8)), f"gpu{g}"
        if cache:
            assert (stats[f"gpu{g}.remote_reads.fetches"], stats[f"gpu{g}.remote_reads.joined"],
                    stats[f"gpu{g}.remote_reads.l2_hits"]) == (1, 3, 4)
