"""CAIS (HPCA'26): the compute-aware ISA (ld.cais / red.cais) with the switch merge unit,
merging-aware TB coordination (pre-launch and pre-access synchronisation, request throttling)
and the graph-level dataflow optimizer with traffic control (spec section 3; the pipeline and its
choices: harness/schemes/cais_dataflow.py). conf/scheme/cais.yaml switches on separate load and
reduction VCs (net.traffic_control) and the merge unit's throttling.
"""
from __future__ import annotations

from harness.schemes import register
from harness.schemes.cais_dataflow import CaisParams, lower_cais


@register("cais", partition="sp", params=CaisParams,
          summary="CAIS: red.cais GEMM-RS -> LN -> ld.cais AG-GEMM released TB by TB, SM-partitioned overlap, "
                  "TB coordination, traffic control")
def lower(graph, target, params: CaisParams):
    return lower_cais(graph, target, params, "cais")
