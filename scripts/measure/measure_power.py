"""SM clock, board power and time of kernels run back to back, per SM partition (H100).
Each kernel runs ~1.6 s back to back; NVML (1 s averaged power) is sampled over the last 0.6 s,
whose last 30 runs are timed with CUDA events (steady-state clock, no host gaps).
Usage (device): python3 scripts/measure/measure_power.py OUT.csv [SMS...]  (default 132 66 100 33)"""
import sys, os, time, threading, csv
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import measure_kernels as mk
from common import EXTRA_GEMM_SHAPES, model_gemm_shapes
import torch
import pynvml as nv
nv.nvmlInit(); H = nv.nvmlDeviceGetHandleByIndex(0)
S = []
def sampler():
    while True:
        S.append((time.time(), nv.nvmlDeviceGetClockInfo(H, 1), nv.nvmlDeviceGetPowerUsage(H) / 1e3, nv.nvmlDeviceGetTemperature(H, 0)))
        time.sleep(0.01)
threading.Thread(target=sampler, daemon=True).start()
med = lambda v: sorted(v)[len(v) // 2]
def steady(fns, run_s=1.6, win_s=0.6):
    t0 = time.time(); i = 0
    while time.time() - t0 < run_s:
        fns[i % len(fns)](); i += 1
    ev = [(torch.cuda.Event(True), torch.cuda.Event(True)) for _ in range(30)]
    for j, (st, en) in enumerate(ev):  # timed while the queue is still full: no host gap, steady clock
        st.record(); fns[j % len(fns)](); en.record()
    torch.cuda.synchronize(); t1 = time.time()
    w = [s for s in S if t1 - win_s <= s[0] <= t1]
    ts = [st.elapsed_time(en) * 1e3 for st, en in ev]
    return med(ts), med([s[1] for s in w]), med([s[2] for s in w]), max(s[3] for s in w)
fh = open(sys.argv[1], "w", newline="")  # flushed per row: rows survive an interrupted run
out = csv.writer(fh); out.writerow(
    ["name", "kind", "M", "N", "K", "num_sms", "measured_us", "sm_clock_mhz", "power_w", "temp_c", "power_limit_w"])
lim = nv.nvmlDeviceGetEnforcedPowerLimit(H) / 1e3
full = torch.cuda.get_device_properties(0).multi_processor_count
sms = [int(x) for x in sys.argv[2:]] or [132, 66, 100, 33]
bf = torch.bfloat16
g = [(n, M, N, K, l) for n, M, N, K, l in model_gemm_shapes()] + [("extra." + n, M, N, K, "NN") for n, M, N, K in EXTRA_GEMM_SHAPES]
sub = {"llama_7b_full.fc1.fwd", "llama_7b.qkv.fwd", "mega_gpt_4b.fc1.fwd", "mega_gpt_4b.attn_out.fwd", "extra.sq8192", "extra.sq2048"}
time.sleep(1.0); print("idle", S[-1], "limit", lim, flush=True)
steady(mk.make_gemm(8192, 8192, 8192, "NN", "cuda", bf), run_s=15)  # warm the GPU to its loaded temperature
for n in sms:
    with mk.SMPartition(n, full, True, "driver"):
        gs = g if n in (132, 66) else [x for x in g if x[0] in sub]
        ks = [(x[0], "gemm", x[1:4], lambda x=x: mk.make_gemm(x[1], x[2], x[3], x[4], "cuda", bf)) for x in gs]
        ks += [("copy_1GiB", "copy", (1 << 29, 1, 0), lambda: [lambda a=torch.randn(1 << 29, device="cuda", dtype=bf), b=torch.empty(1 << 29, device="cuda", dtype=bf): b.copy_(a)]),
               ("llama_7b_full.layernorm", "layernorm", (9216, 8192, 0), lambda: mk.make_layernorm(9216, 8192, "cuda", bf))]
        for name, kind, (m_, n_, k_), mk_fns in ks:
            try:
                fns = mk_fns(); r = steady(fns); del fns
                out.writerow([name, kind, m_, n_, k_, n, f"{r[0]:.3f}", r[1], f"{r[2]:.1f}", r[3], lim])
                fh.flush(); print(n, name, *r, flush=True)
            except Exception as e:  # noqa: BLE001
                print(n, name, "FAILED", type(e).__name__, e, flush=True)
    torch.cuda.empty_cache()
