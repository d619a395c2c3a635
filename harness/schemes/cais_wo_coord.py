"""CAIS-w/o-Coord (spec A12): CAIS with its dataflow optimizer and traffic control but without
the three coordination steps: no pre-launch or pre-access synchronisation (the kernels carry no
CAIS_SYNC wait) and no request throttling (conf/scheme/cais_wo_coord.yaml sets the three
scheme switches off). The merge unit merges whatever requests happen to meet in time.
"""
from __future__ import annotations

from harness.schemes import register
from harness.schemes.cais_dataflow import CaisParams, lower_cais


@register("cais_wo_coord", partition="sp", params=CaisParams,
          summary="CAIS without pre-launch sync, pre-access sync and request throttling")
def lower(graph, target, params: CaisParams):
    return lower_cais(graph, target, params, "cais_wo_coord")
