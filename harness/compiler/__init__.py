"""The CAIS compiler: static index analysis over the tile ISA that turns a kernel's GPU-invariant
remote accesses into ld.cais / red.cais, forms the TB groups and attaches the merging-aware
coordination (paper III-B1/B2, spec 3.4 and 3.5).

Public API (stable; everything else is internal):

    compile_cais(builder_or_workload, kernel_indices=None, num_gpus=None,
                 coordination=Coordination()) -> CompileReport

- builder_or_workload: a harness.kernels.builder.WorkloadBuilder or an isa.Workload; rewritten in
  place.
- kernel_indices: indices into workload.kernels to compile (default: every kernel).
- num_gpus: GPUs per TB group (default: workload.num_gpus); a kernel launched on another number
  of GPUs is left alone and reported.
- coordination: Coordination(pre_launch=False, pre_access=False), harness.compiler.coordination.
  Request throttling is the switch's net.cais_merge.throttle, set in a scheme's YAML.

What it proves and rewrites: LD_REMOTE -> LD_CAIS and RED_REMOTE -> RED_CAIS where neither the
address nor the peer (the GPU accessed) has a GPU-id term, linear or inside a quotient
(index_analysis). What it refuses, with the reason in the report: anything depending on the GPU
id (ring steps' rotated addresses, per-rank slots, peers such as (g + 1) mod N), multicast
buffers, stores, NVLS and copy-engine operations, flag signals, and kernels whose launches do not
all run on one contiguous GPU range or that are launched more than once. Local accesses are
never touched.
"""
from harness.compiler.cais_pass import compile_cais
from harness.compiler.coordination import Coordination
from harness.compiler.report import CompileReport, Decision, KernelReport

__all__ = ["compile_cais", "Coordination", "CompileReport", "Decision", "KernelReport"]
