"""CAIS-Partial (paper V-B2, spec A12): CAIS with the graph-level dataflow optimizer and TB
coordination but without traffic control: loads, reductions and stores share the request VCs
(conf/scheme/cais_partial.yaml leaves net.traffic_control off), so small ld.cais requests can
queue behind 9-flit red.cais packets on the GPU-to-switch link.
"""
from __future__ import annotations

from harness.schemes import register
from harness.schemes.cais_dataflow import CaisParams, lower_cais


@register("cais_partial", partition="sp", params=CaisParams,
          summary="CAIS without traffic control (loads and reductions share VCs)")
def lower(graph, target, params: CaisParams):
    return lower_cais(graph, target, params, "cais_partial")
