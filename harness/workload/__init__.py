"""Workloads: the models of conf/model, the phases, and a transformer layer (or sub-layer) under
tensor parallelism as an operator graph (harness.workload.graph) that a scheme lowers to kernels."""
from harness.workload.graph import Attention, Collective, Gemm, Graph, Norm  # noqa: F401
from harness.workload.layer import PHASES, WORKLOADS, build  # noqa: F401
from harness.workload.models import ModelDims, from_config  # noqa: F401
