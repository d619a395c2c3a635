"""Static index analysis of the tile ISA: does an expression depend on the GPU id?

An address or peer is an isa.Affine: base + bx*block_x + by*block_y + g*gpu + sum(L_i*loop_i)
+ sum(scale * floor((linear terms) / divisor)), optionally modulo m (proto/isa.proto). Its value
on GPU g is the same for every g exactly when g contributes nothing. The analysis proves that
only in the plain case: the gpu coefficient is 0 and every quotient term with a non-zero scale
has a gpu coefficient of 0. Anything else (a rank in the linear part, a rank inside a floor, a
ring step's `rotated()` modulo) counts as GPU-variant, even where arithmetic could show the term
constant over the GPUs of a launch: the pass may refuse a mergeable access, never merge a
variant one (paper III-B1: "The analysis detects whether the expression contains the GPU ID").
"""
from __future__ import annotations


def gpu_terms(a) -> list[str]:
    """The terms through which affine `a` depends on the GPU id, as text (empty: invariant)."""
    found = []
    if a.gpu:
        found.append(f"{a.gpu}*g")
    for q in a.quotient:
        if q.gpu and q.scale:
            found.append(f"{q.scale}*floor((... {q.gpu}*g ...) / {q.divisor})")
    return found


def gpu_invariant(a) -> bool:
    """True when affine `a` provably has the same value on every GPU."""
    return not gpu_terms(a)


def variance_reason(ins) -> str:
    """Why a memory instruction's location depends on the GPU ('' if it does not): its address
    or, for an access to another GPU, the GPU it targets (`peer`)."""
    why = []
    if ins.HasField("addr") and (terms := gpu_terms(ins.addr)):
        why.append(f"address depends on the GPU id ({', '.join(terms)})")
    if ins.HasField("peer") and (terms := gpu_terms(ins.peer)):
        why.append(f"peer depends on the GPU id ({', '.join(terms)})")
    return "; ".join(why)
