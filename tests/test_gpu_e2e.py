"""End to end: the Hopper GPU engine with the NVSwitch network engine and the CAIS merge unit.

8-GPU AG-GEMM (DGX-H100 topology): with ld.cais and in-switch merging each owner sends every
line of its activation shard once (NVLink bytes == the analytical count); with plain remote
loads every one of the 7 requesters fetches it separately (7x the owner's egress bytes).
"""
from __future__ import annotations

import pytest

from harness.gpu import ag_gemm
from harness.system import run_system

from conftest import compose

M, N, K, G = 1024, 128, 512, 8  # one column of blocks: every A line is wanted by 7 GPUs once


def _run(mode: str):
    cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.features='group_sync,cais_merge'",
                  "net.cais_merge.timeout_ns=100000")
    wl = ag_gemm.ag_gemm(M, N, K, G, mode=mode, sms=8)
    res = run_system(cfg, workload=wl.SerializeToString(), overrides={"gpu.launch_skew_ns": 0.0})
    st = res.stats

    def total(pattern: str) -> float:
        return float(st.loc[st["name"].str.fullmatch(pattern), "value"].sum())

    return res, total


def _check_models(engines):
    from harness.protocol import cosim  # noqa: F401  (proto generated)
    if not (engines / "cais-engine").exists():
        pytest.skip("cais-engine not built")


def test_ag_gemm_cais_merges_to_the_analytical_byte_count(engines):
    _check_models(engines)
    res_c, tc = _run("cais")
    res_r, tr = _run("remote")
    expect_c = ag_gemm.ag_gemm_remote_bytes(M, N, K, G, tn=128, mode="cais")
    expect_r = ag_gemm.ag_gemm_remote_bytes(M, N, K, G, tn=128, mode="remote")
    owner_c = tc(r"gpu\d+\.tx\.CAIS_LD_RESP\.bytes")
    owner_r = tr(r"gpu\d+\.tx\.READ_RESP\.bytes")
    assert owner_c == expect_c["owner_egress_bytes"]
    assert owner_r == expect_r["owner_egress_bytes"]
    assert owner_r == 7 * owner_c
    # every requester still receives every line it asked for
    assert tc(r"gpu\d+\.rx\.CAIS_LD_RESP\.bytes") == expect_c["requester_ingress_bytes"]
    assert tr(r"gpu\d+\.rx\.READ_RESP\.bytes") == expect_r["requester_ingress_bytes"]
    # the merge unit saw 7 requests per line: 1 miss + 6 hits, nothing evicted or timed out
    assert tc(r".*merge.*misses") * 6 == tc(r".*merge.*hits")
    assert tc(r".*merge.*(evictions|timeouts)") == 0
    # pre-launch group sync: one SYNC_REQ per block per GPU
    assert tc(r"gpu\d+\.sync_requests") == G * G * (M // G // 128)
    assert tc(r"gpu\d+\.tbs_completed") == tr(r"gpu\d+\.tbs_completed") == G * G * (M // G // 128)
    # less owner egress, so the CAIS run is not slower than the remote-load run
    assert res_c.end_ps <= res_r.end_ps


@pytest.mark.parametrize("member_acks", [False, True])
def test_multimem_red_through_nvls_sums_every_gpu(engines, member_acks):
    """8 GPUs multimem.red 1 KB (values = rank + 1) into one multicast buffer through the NVLS
    feature, then meet at a flag barrier (remote flag writes) and read their local copy: every
    element is 1 + 2 + ... + 8 = 36 on every GPU; multimem.ld_reduce returns 8 x 36."""
    _check_models(engines)
    from harness.gpu.isa_text import parse
    others = "\n".join(f"  flag.signal buf=F addr=[0] peer=[g + {i} % 8] value=1 scope=remote" for i in range(1, 8))
    wl = parse(f"""
.workload mm gpus=8 functional
.buffer MC bytes=1024 dtype=fp32 multicast
.buffer F bytes=64 dtype=fp32
.buffer X bytes=1024 dtype=fp32
.kernel k grid=1x1 threads=128 regs=32 smem=0
  multimem.red buf=MC addr=[0] rows=1 row_bytes=1024
{others}
  flag.wait buf=F addr=[0] value=7
  ld buf=MC addr=[0] rows=1 row_bytes=1024
  multimem.ld_reduce buf=MC addr=[0] rows=1 row_bytes=1024
.end
.launch k stream=0 priority=0
""")
    cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.features='nvls'", "net.functional=true",
                  f"net.nvls.member_acks={str(member_acks).lower()}")
    res = run_system(cfg, workload=wl.SerializeToString(), overrides={"gpu.launch_skew_ns": 0.0})
    st = res.stats.set_index("name")["value"]
    for g in range(8):
        # local load: 256 elements x 36; ld_reduce: 256 x (8 x 36)
        assert st[f"gpu{g}.ld_value_sum"] == 256 * 36 + 256 * 8 * 36
        assert st[f"gpu{g}.rx.MM_ACK.packets"] == 8  # one per multimem.red packet (1 KB = 8 lines)


def test_red_cais_contributions_merge_into_one_write_per_line(engines):
    """Reduce-scatter style: GPUs 1..7 red.cais 1 KB into GPU 0 (home; TB group of 8 GPUs, the
    home contributes locally): the merge unit sends GPU 0 one CAIS_RED per 128 B line carrying
    7 contributions, instead of 7 writes per line."""
    _check_models(engines)
    from harness.gpu.isa_text import parse
    wl = parse("""
.workload rs gpus=8
.buffer X bytes=4096 dtype=bf16
.kernel k grid=1x1 threads=128 regs=32 smem=0
  .cais group_base=5 gpus=8 first=0 prelaunch
  red.cais buf=X addr=[0] peer=[0] rows=1 row_bytes=1024
.end
.launch k stream=0 priority=0
""")
    cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.features='group_sync,cais_merge'",
                  "net.cais_merge.timeout_ns=100000")
    res = run_system(cfg, workload=wl.SerializeToString(), overrides={"gpu.launch_skew_ns": 0.0})
    st = res.stats.set_index("name")["value"]
    for g in range(1, 8):
        assert st[f"gpu{g}.tx.CAIS_RED.packets"] == 8 and st[f"gpu{g}.tx.CAIS_RED.bytes"] == 1024
    assert st["gpu0.tx.CAIS_RED.packets"] == 0  # the home's own contribution stays local
    assert st["gpu0.rx.CAIS_RED.packets"] == 8 and st["gpu0.rx.CAIS_RED.bytes"] == 1024


def test_hopper_results_do_not_depend_on_the_process_split(engines):
    """Same statistics, byte for byte, whether the 8 GPUs share one process or run in 8; with
    the default launch skew and block jitter, and 8 concurrent pre-launch-synchronised kernels
    per GPU on one SM partition (blocks wait for their group's release without holding an SM,
    so GPUs whose skews interleave the kernels differently cannot deadlock)."""
    _check_models(engines)
    outs = []
    for gpp in (8, 1):
        cfg = compose("system=dgx_h100", "system.gpu_model=hopper", "net.features='group_sync,cais_merge'",
                      f"cosim.gpus_per_process={gpp}", "cosim.switches_per_process=2")
        wl = ag_gemm.ag_gemm(1024, 256, 512, 8, mode="cais", sms=8)
        res = run_system(cfg, workload=wl.SerializeToString())
        outs.append(res)
    a, b = outs
    assert a.end_ps == b.end_ps
    pd_a = a.stats.set_index("name")["value"]
    pd_b = b.stats.set_index("name")["value"]
    assert pd_a.equals(pd_b)


def test_flags_sharing_a_sector_stay_apart(engines):
    """Four blocks per GPU meet in a flag barrier whose 8 B flags share one 32 B sector: each
    block's remote flag writes must land on its own flag (they once collapsed onto the sector's
    first word, so three blocks per GPU waited forever)."""
    from harness.kernels.builder import WorkloadBuilder, affine
    from harness.kernels.flags import barrier

    b = WorkloadBuilder("flag_barrier", 8, 132)
    flags = b.flags("f", 4)
    ki, p = b.kernel("k", 4, 1)
    barrier(p, flags, affine(0, bx=8), 8)
    b.launch(ki, b.stream("main"))
    res = run_system(compose("system=dgx_h100"), workload=b.wl.SerializeToString(),
                     overrides={"host.gpu_model": "hopper"})
    st = res.stats.set_index("name")["value"]
    assert sum(st[f"gpu{g}.tbs_completed"] for g in range(8)) == 32
