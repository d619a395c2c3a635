"""The kernel library: tile-ISA kernels a scheme composes into a multi-GPU workload.

``gemm`` (the parametric GEMM: operand sources, result sinks, per-tile signals), ``layer_ops``
(layernorm, attention), ``nvls`` and ``ring`` (the collectives as NCCL runs them, on their
channels' SMs), ``flags`` (cross-GPU readiness), ``builder`` (buffers, kernels, launches).
"""
