"""GPU-side workload tools: the tile ISA's text form (isa_text) and kernel builders (kernels)."""
