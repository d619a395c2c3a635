"""Keep chosen SMs busy while a measurement runs, so that the measured kernel's CTAs run on the
others (CUDA's block scheduler cannot be told where to place CTAs).

An occupier block fills a whole SM (1024 threads, 227 KiB of shared memory), so no other CTA can
share the SM, and spins (nanosleep) for a given time on its own stream. `Occupier(dev, K)` starts
K such blocks wherever CUDA puts them; `Occupier(dev, 0, leave)` starts one per SM and the blocks
that land on an SM in `leave` exit at once, leaving exactly those SMs to the measured kernel.
"""
from __future__ import annotations


def parse_sms(spec: str) -> list[int]:
    """'0-46/2,100' -> [0, 2, ..., 46, 100]."""
    out = []
    for part in spec.split(","):
        rng, _, step = part.partition("/")
        lo, _, hi = rng.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1, int(step or 1)))
    return out


OCCUPIER = r"""
// leave[s] != 0: the block that lands on SM s exits at once (that SM stays free).
extern "C" __global__ void occupy(unsigned long long ns, unsigned* smid, const unsigned char* leave) {
  extern __shared__ unsigned char pad[];
  unsigned long long t0, t;
  unsigned id;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t0));
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  if (threadIdx.x == 0) {
    smid[blockIdx.x] = leave[id] ? 0xffffffffu : id;
    pad[0] = 1;
  }
  if (leave[id]) return;
  do {
    __nanosleep(2000);
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  } while (t - t0 < ns);
}
"""


class Occupier:
    """K resident blocks that each fill an SM, spinning on a side stream for a given time."""

    SMEM = 227 * 1024

    def __init__(self, rank: int, blocks: int, leave: list[int] | None = None):
        import cupy as cp
        self.cp = cp
        cp.cuda.Device(rank).use()
        n_sm = cp.cuda.runtime.getDeviceProperties(rank)["multiProcessorCount"]
        self.blocks = blocks or n_sm  # with SMs left free: one block per SM, the free ones exit
        self.kernel = cp.RawKernel(OCCUPIER, "occupy")
        self.kernel.max_dynamic_shared_size_bytes = self.SMEM
        self.stream = cp.cuda.Stream(non_blocking=True)
        self.smid = cp.zeros(self.blocks, dtype=cp.uint32)
        mask = [0] * 1024
        for sm in leave or []:
            mask[sm] = 1
        self.leave = cp.asarray(mask, dtype=cp.uint8)

    def start(self, seconds: float) -> None:
        with self.stream:
            self.kernel((self.blocks,), (1024,), (self.cp.uint64(int(seconds * 1e9)), self.smid, self.leave),
                        shared_mem=self.SMEM)

    def sms(self) -> list[int]:
        self.stream.synchronize()
        return sorted(int(x) for x in self.smid.get() if x != 0xFFFFFFFF)
