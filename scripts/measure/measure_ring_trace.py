#!/usr/bin/env python3
"""An NCCL-like ring on 2 GPUs with a timestamp on every slice of every channel.

NCCL's ring busbw on 2 x H200 grows with message size only at 12+ channels, and below 8
channels its fixed cost is ~10 us against 20-40 us above (docs/MEASUREMENTS.md call 13). NCCL
cannot say where its channels spend their time, so this script runs the same protocol itself and
records it: N CTAs per GPU (one per channel, 512 threads), NCCL 2.28's Simple ring for
all_gather (copySend, recv) and reduce_scatter (send, recvReduceCopy) between GPU 0 and 1, its
partition (each channel a contiguous 1/N of the shard, chunks of 2 MiB cut into 2 slices,
slice = max(ceil(chunk/2), 32 KiB)), its buffer (4 MiB per channel = 4 slots of one 1 MiB slice
each, i.e. NCCL_STEPS 8 / SLICESTEPS 2), its flags (after a send slice: __syncthreads, one thread
__threadfence_system then the tail flag to the peer; after a receive slice the head flag back)
and its data path (16 B per thread, 4 loads in flight, bf16 adds). Channel c of both GPUs meet
at a flag handshake before they start.

CSVs:
  --out        op,ctas,bytes,iter,kernel_us,busbw_GBps,gpu: kernel_us from the first slice's
               start to the last slice's end over both GPUs (globaltimer); bytes as nccl-tests
               count them (total over ranks); busbw = bytes / 2 / time.
  --trace      op,ctas,bytes,gpu_index,cta,smid,op_index,prim,wait_ns,begin_ns,end_ns:
               the last timed iteration, times relative to that GPU's earliest slice start;
               smid: the SM the channel's CTA ran on (%smid);
               wait_ns: when the channel began waiting for data (recv) or a free slot (send).

--back-to-back N times N calls queued back to back on each GPU with CUDA events around each
(launch gaps and the coupling of consecutive calls across GPUs included, as for NCCL); the
flags then count on across calls. --cluster 4 launches the CTAs in clusters of 4, as NCCL 2.28 does on Hopper (channels must be a
multiple). --leave-sms RANGES keeps every other SM busy (occupy.py), so that the channels run on those SMs.

Usage (device, 2 GPUs, one process):
  python3 scripts/measure/measure_ring_trace.py --out $OUT/ring.csv --trace $OUT/ring_trace.csv
Per channel: SM, mean slice time per primitive and end time (anywhere, from a trace CSV):
  python3 scripts/measure/measure_ring_trace.py --summarize TRACE.csv[.gz] [--ops all_gather]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import CsvOut, enforce_no_multicast  # noqa: E402
from occupy import Occupier, parse_sms  # noqa: E402

SLOTS = 4
SLOT_BYTES = 1 << 20  # one slice of SLICESTEPS 2 x 512 KiB steps
CHUNK_BYTES = 2 << 20  # CHUNKSTEPS 4 x 512 KiB
PRIMS = {"all_gather": ("copySend", "recv"), "reduce_scatter": ("send", "recvReduceCopy")}

KERNELS = r"""
#include <cuda_bf16.h>
#define UNROLL 4
#define SLOTS 4
typedef unsigned long long u64;
__device__ __forceinline__ u64 gtimer() { u64 t; asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t)); return t; }
__device__ __forceinline__ uint4 add_bf16x8(uint4 x, uint4 y) {
  __nv_bfloat162* a = reinterpret_cast<__nv_bfloat162*>(&x);
  const __nv_bfloat162* b = reinterpret_cast<const __nv_bfloat162*>(&y);
#pragma unroll
  for (int k = 0; k < 4; ++k) a[k] = __hadd2(a[k], b[k]);
  return x;
}
// POST_WARP: as NCCL 2.28, the last warp only posts (fence + flag) while the other warps copy the
// next slice; otherwise thread 0 posts and every thread copies.
#ifdef POST_WARP
#define NWORKERS (blockDim.x - 32)
#define POSTER (blockDim.x - 32)
#else
#define NWORKERS blockDim.x
#define POSTER 0
#endif
// d0 = s0 (+ s1 if s1); d1 = the same if d1. Called by the NWORKERS worker threads.
__device__ __forceinline__ void move(const uint4* s0, const uint4* s1, uint4* d0, uint4* d1, long long n) {
  const long long nw = NWORKERS;
  for (long long base = threadIdx.x; base < n; base += nw * UNROLL) {
    uint4 v[UNROLL];
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long i = base + (long long)u * nw;
      if (i < n) { v[u] = s0[i]; if (s1) v[u] = add_bf16x8(v[u], s1[i]); }
    }
#pragma unroll
    for (int u = 0; u < UNROLL; ++u) {
      const long long i = base + (long long)u * nw;
      if (i < n) { d0[i] = v[u]; if (d1) d1[i] = v[u]; }
    }
  }
}
// op 0: all_gather (in: my shard; out: both shards), op 1: reduce_scatter (in: both blocks;
// out: my block). flags[2c]: tail (slices the peer posted to me), flags[2c+1]: head (my slices
// the peer consumed). Sizes in 16 B units.
#ifdef CLUSTER
#define CLUSTER_ATTR __cluster_dims__(CLUSTER, 1, 1)
#else
#define CLUSTER_ATTR
#endif
extern "C" __global__ void delay(u64 ns) {
  const u64 t0 = gtimer();
  while (gtimer() - t0 < ns) {}
}
extern "C" __global__ void CLUSTER_ATTR ring(int op, int rank, const uint4* in, uint4* out, uint4* my_buf, uint4* peer_buf,
                                volatile u64* my_flags, volatile u64* peer_flags, volatile u64* my_ready,
                                volatile u64* peer_ready, u64 token, long long shard, long long chunk,
                                long long slot, int max_ops, u64* trace, unsigned* smid, long long iter,
                                int handshake) {
  const int c = blockIdx.x, nch = gridDim.x, peer = 1 - rank;
  const long long per = (shard + nch - 1) / nch;
  const long long start = min((long long)c * per, shard), len = min(shard - start, per);
  uint4* rbuf = my_buf + (long long)c * SLOTS * slot;    // where the peer writes to me
  uint4* sbuf = peer_buf + (long long)c * SLOTS * slot;  // where I write to the peer
  u64* tr = trace + ((long long)c * max_ops) * 3;
  if (threadIdx.x == 0) {
    unsigned id;
    asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
    smid[c] = id;
    if (handshake) {
      peer_ready[c] = token;
      while (my_ready[c] != token) {}
    }
  }
  __syncthreads();
  // Flags count slices since they were last reset: back-to-back calls continue the count.
  const u64 per_call = 2 * (u64)((len + chunk - 1) / chunk);
  u64 sent = iter * per_call, recvd = iter * per_call;
  int k = 0;
  for (long long eo = 0; eo < len; eo += chunk) {
    const long long nelem = min(chunk, len - eo);
    const long long sl = max((nelem + 1) / 2, slot / 32);
    for (int phase = 0; phase < 2; ++phase) {  // 0: the send primitive, 1: the receive primitive
      for (int s = 0; s < 2; ++s, ++k) {
        const long long off = min((long long)s * sl, nelem), n = min(sl, nelem - off);
        u64 tw = 0;
        if (threadIdx.x == 0) {
          tw = gtimer();
          if (phase == 0) { while (sent - my_flags[2 * c + 1] >= SLOTS) {} }
          else { while (my_flags[2 * c] < recvd + 1) {} __threadfence(); }
        }
#ifdef POST_WARP
        if (threadIdx.x < NWORKERS) asm volatile("bar.sync 1, %0;" ::"r"(NWORKERS) : "memory");
#else
        __syncthreads();
#endif
        const u64 tb = gtimer();
        const long long o = start + eo + off;
        if (threadIdx.x >= NWORKERS) {
        } else if (phase == 0) {
          uint4* dst = sbuf + (sent % SLOTS) * slot;
          if (op == 0) move(in + o, nullptr, dst, out + rank * shard + o, n);      // copySend
          else move(in + peer * shard + o, nullptr, dst, nullptr, n);              // send
        } else {
          const uint4* src = rbuf + (recvd % SLOTS) * slot;
          if (op == 0) move(src, nullptr, out + peer * shard + o, nullptr, n);     // recv
          else move(src, in + rank * shard + o, out + o, nullptr, n);              // recvReduceCopy
        }
        __syncthreads();
        if (phase == 0) {
          ++sent;
          if (threadIdx.x == POSTER) { __threadfence_system(); peer_flags[2 * c] = sent; }
        } else {
          ++recvd;
          if (threadIdx.x == POSTER) peer_flags[2 * c + 1] = recvd;
        }
        if (threadIdx.x == 0 && k < max_ops) { tr[3 * k] = tw; tr[3 * k + 1] = tb; tr[3 * k + 2] = gtimer(); }
      }
    }
  }
}
"""


def launch_ring(cp, dev_state, dev, op_id, ctas, threads, token, shard16, chunk16, slot16, max_ops, call, handshake):
    """Launch the ring kernel on GPU `dev` (the caller has made it current). call: how many calls
    since the flags were reset; handshake: meet the peer's CTAs before the first slice."""
    s, p = dev_state[dev], dev_state[1 - dev]
    s["mod"].get_function("ring")(
        (ctas,), (threads,),
        (cp.int32(op_id), cp.int32(dev), s["in"], s["out"], s["buf"], p["buf"], s["flags"], p["flags"], s["ready"],
         p["ready"], cp.uint64(token), cp.int64(shard16), cp.int64(chunk16), cp.int64(slot16), cp.int32(max_ops),
         s["trace"], s["smid"], cp.int64(call), cp.int32(1 if handshake else 0)))


def back_to_back(cp, dev_state, op_id, ctas, nbytes, args, chunk16, slot16, max_ops, token, warm=3):
    """Per-call times (us, max over the two GPUs) of `args.back_to_back` calls queued back to back
    behind a 5 ms delay kernel, so that the host has queued them all before the GPUs start."""
    n = warm + args.back_to_back
    ev = {}
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            dev_state[dev]["flags"].fill(0)
            cp.cuda.Device(dev).synchronize()
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            dev_state[dev]["mod"].get_function("delay")((1,), (32,), (cp.uint64(5_000_000),))
    for it in range(n):
        for dev in (0, 1):
            with cp.cuda.Device(dev):
                a, b = cp.cuda.Event(), cp.cuda.Event()
                a.record()
                launch_ring(cp, dev_state, dev, op_id, ctas, args.threads, token, nbytes // 2 // 16, chunk16, slot16,
                            max_ops, call=it, handshake=it == 0)
                b.record()
                ev[(dev, it)] = (a, b)
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            cp.cuda.Device(dev).synchronize()
    return [max(cp.cuda.get_elapsed_time(*ev[(dev, it)]) for dev in (0, 1)) * 1e3 for it in range(warm, n)]


def parse_sizes(s: str) -> list[int]:
    mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    return [int(x[:-1]) * mult[x[-1]] if x[-1] in mult else int(x) for x in s.split(",")]


def summarize(path: str, ops: list[str]) -> None:
    """Per (op, channels, bytes, GPU): each channel's SM, mean slice time of its two primitives
    and the time its last slice ended (us)."""
    import pandas as pd

    t = pd.read_csv(path)
    t = t[t.op.isin(ops)].assign(dur_us=lambda d: (d.end_ns - d.begin_ns) / 1e3)
    for (op, ctas, nbytes, g), q in t.groupby(["op", "ctas", "bytes", "gpu_index"]):
        per = q.groupby("cta")
        prim = q.groupby(["cta", "prim"]).dur_us.mean().unstack()
        print(f"{op} {ctas} channels {nbytes >> 20} MiB GPU {g}")
        print("  smid    " + " ".join(f"{v:6d}" for v in per.smid.first()))
        for name in PRIMS[op]:
            print(f"  {name:8s}" + " ".join(f"{v:6.1f}" for v in prim[name]))
        print("  end_us  " + " ".join(f"{v / 1e3:6.0f}" for v in per.end_ns.max()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--summarize", metavar="TRACE", help="print per-channel figures of a trace CSV and exit")
    ap.add_argument("--out")
    ap.add_argument("--trace", default="")
    ap.add_argument("--ops", default="all_gather,reduce_scatter")
    ap.add_argument("--ctas", default="1,4,8,12,16,24")
    ap.add_argument("--sizes", default="64M,128M,256M,512M,1G", help="nccl-tests bytes (total over ranks)")
    ap.add_argument("--threads", type=int, default=512)
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--back-to-back", type=int, default=0, metavar="N",
                    help="instead: N timed calls (after 3 warm-up calls) queued back to back on each GPU, "
                         "timed with CUDA events around each call as measure_nccl.py times NCCL")
    ap.add_argument("--post-warp", action="store_true",
                    help="NCCL 2.28's post warp: the last warp fences and flags slice k while the others copy k+1")
    ap.add_argument("--cluster", type=int, default=0,
                    help="launch the CTAs in thread-block clusters of this size (NCCL 2.28 uses 4 on Hopper)")
    ap.add_argument("--leave-sms", default="", metavar="RANGES",
                    help="keep every other SM busy (occupy.py) so that the channels run on these, e.g. 0-46/2")
    args = ap.parse_args()
    if args.summarize:
        summarize(args.summarize, args.ops.split(","))
        return
    if not args.out:
        ap.error("--out is required (or --summarize TRACE)")
    enforce_no_multicast()
    import cupy as cp
    import numpy as np

    if cp.cuda.runtime.getDeviceCount() < 2:
        sys.exit("need 2 GPUs")
    gpu = cp.cuda.runtime.getDeviceProperties(0)["name"].decode()
    ops, ctas_list, sizes = args.ops.split(","), [int(x) for x in args.ctas.split(",")], parse_sizes(args.sizes)
    maxc, maxb = max(ctas_list), max(sizes)
    slot16, chunk16 = SLOT_BYTES // 16, CHUNK_BYTES // 16
    max_ops = 4 * (-(-maxb // 2 // CHUNK_BYTES) + 1)
    dev_state = []
    for dev in (0, 1):
        with cp.cuda.Device(dev):
            cp.cuda.runtime.deviceEnablePeerAccess(1 - dev)
            # bf16 payload as raw 16-bit words in [0x3c00, 0x4000): finite values, any sum is finite
            words = (cp.random.RandomState(dev).randint(0, 1 << 10, maxb // 2, dtype=cp.int32) + 0x3C00).astype(cp.uint16)
            dev_state.append({
                "mod": cp.RawModule(code=KERNELS, options=("-std=c++17",) +
                                    ((f"-DCLUSTER={args.cluster}",) if args.cluster else ()) +
                                    (("-DPOST_WARP",) if args.post_warp else ())),
                "in": words, "out": cp.zeros(maxb // 2, dtype=cp.uint16),
                "buf": cp.zeros(maxc * SLOTS * SLOT_BYTES // 2, dtype=cp.uint16),
                "flags": cp.zeros(2 * maxc, dtype=cp.uint64), "ready": cp.zeros(maxc, dtype=cp.uint64),
                "trace": cp.zeros(maxc * max_ops * 3, dtype=cp.uint64), "smid": cp.zeros(maxc, dtype=cp.uint32),
            })
    occs = [Occupier(dev, 0, parse_sms(args.leave_sms)) for dev in (0, 1)] if args.leave_sms else []
    out = CsvOut(args.out, ["op", "ctas", "bytes", "iter", "kernel_us", "busbw_GBps", "gpu"])
    tr_out = CsvOut(args.trace, ["op", "ctas", "bytes", "gpu_index", "cta", "smid", "op_index", "prim",
                                 "wait_ns", "begin_ns", "end_ns"]) if args.trace else None
    token = 0
    if args.back_to_back:
        for op in ops:
            for ctas in ctas_list:
                for nbytes in sizes:
                    token += 1
                    times = back_to_back(cp, dev_state, {"all_gather": 0, "reduce_scatter": 1}[op], ctas, nbytes,
                                         args, chunk16, slot16, max_ops, token)
                    for i, us in enumerate(times):
                        out.row(op=op, ctas=ctas, bytes=nbytes, iter=i + 1, kernel_us=round(us, 3),
                                busbw_GBps=round(nbytes / 2 / (us * 1e3), 2), gpu=gpu)
                    med = statistics.median(times)
                    print(f"{op:14s} ctas {ctas:3d} {nbytes >> 20:6d} MiB: {med:9.1f} us  busbw "
                          f"{nbytes / 2 / (med * 1e3):7.1f}  (back to back)", flush=True)
        out.close()
        return
    for op in ops:
        op_id = {"all_gather": 0, "reduce_scatter": 1}[op]
        for ctas in ctas_list:
            for nbytes in sizes:
                shard16 = nbytes // 2 // 16
                spans = []
                for it in range(args.iters + 1):
                    token += 1
                    for dev in (0, 1):
                        with cp.cuda.Device(dev):
                            dev_state[dev]["flags"].fill(0)
                            dev_state[dev]["trace"].fill(0)
                            cp.cuda.Device(dev).synchronize()
                    for dev, occ in enumerate(occs):
                        with cp.cuda.Device(dev):
                            occ.start(0.1)  # longer than the slowest case (1 channel, 1 GiB: ~50 ms)
                    if occs:
                        time.sleep(0.005)  # the occupiers are resident, those on free SMs gone
                    for dev in (0, 1):
                        with cp.cuda.Device(dev):
                            launch_ring(cp, dev_state, dev, op_id, ctas, args.threads, token, shard16, chunk16,
                                        slot16, max_ops, call=0, handshake=True)
                    traces, smids = [], []
                    for dev in (0, 1):
                        with cp.cuda.Device(dev):
                            cp.cuda.Device(dev).synchronize()
                            traces.append(cp.asnumpy(dev_state[dev]["trace"][: ctas * max_ops * 3]).reshape(ctas, max_ops, 3))
                            smids.append(cp.asnumpy(dev_state[dev]["smid"][:ctas]))
                    for dev, occ in enumerate(occs):
                        with cp.cuda.Device(dev):
                            occ.sms()  # wait for the occupiers to end
                    used = [t[:, :, 2] > 0 for t in traces]
                    span = max(int(t[:, :, 2][u].max()) - int(t[:, :, 1][u].min()) for t, u in zip(traces, used)) / 1e3
                    if it:
                        spans.append(span)
                        out.row(op=op, ctas=ctas, bytes=nbytes, iter=it, kernel_us=round(span, 3),
                                busbw_GBps=round(nbytes / 2 / (span * 1e3), 2), gpu=gpu)
                if op == "all_gather" and nbytes == sizes[0]:  # the output holds both shards
                    for dev in (0, 1):
                        with cp.cuda.Device(dev):
                            got = cp.asnumpy(dev_state[dev]["out"][: nbytes // 2])
                        want = np.concatenate([cp.asnumpy(dev_state[r]["in"][: nbytes // 4]) for r in (0, 1)])
                        if not np.array_equal(got, want):
                            sys.exit(f"all_gather output wrong on GPU {dev} ({ctas} CTAs, {nbytes} B)")
                med = statistics.median(spans)
                print(f"{op:14s} ctas {ctas:3d} {nbytes >> 20:6d} MiB: {med:9.1f} us  busbw {nbytes / 2 / (med * 1e3):7.1f}",
                      flush=True)
                if tr_out:
                    names = PRIMS[op]
                    for g, t in enumerate(traces):
                        t0 = int(t[:, :, 1][used[g]].min())
                        for c in range(ctas):
                            for k in range(max_ops):
                                if t[c, k, 2] == 0:
                                    break
                                tr_out.row(op=op, ctas=ctas, bytes=nbytes, gpu_index=g, cta=c, smid=int(smids[g][c]), op_index=k,
                                           prim=names[(k // 2) % 2],
                                           wait_ns=int(t[c, k, 0]) - t0, begin_ns=int(t[c, k, 1]) - t0,
                                           end_ns=int(t[c, k, 2]) - t0)
    out.close()
    if tr_out:
        tr_out.close()


if __name__ == "__main__":
    main()
