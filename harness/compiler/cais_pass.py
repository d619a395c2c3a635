"""The CAIS compiler pass (paper III-B1, spec 3.4): find the GPU-invariant remote accesses of
kernels, rewrite them to their CAIS forms, form TB groups and attach the coordination.

For every instruction of a selected kernel that reaches another GPU:
- LD_REMOTE (a plain remote load) becomes LD_CAIS and RED_REMOTE (a plain remote atomic add)
  becomes RED_CAIS when the location is GPU-invariant (index_analysis: neither its address nor
  the GPU it targets depends on the GPU id) and remote-capable (a unicast buffer of the symmetric
  heap). Then blocks with the same blockIdx on every GPU touch the same bytes, and the switch can
  merge their requests.
- Every other remote instruction is refused and reported: stores (a merged store has no meaning),
  multimem and copy-engine operations (not SM loads or reductions), flag signals.
Local instructions are never touched. A kernel with a .cais access gets kernel.cais: enabled,
the GPUs of its launches (first_gpu, num_gpus: every launch of it must run on the same
contiguous range) and group_base, the first of its grid_x * grid_y group ids; the engine puts
group_base + linear block id on a block's packets and sync requests (tb_scheduler.cc
begin_block), so bases are allocated after every group id already in use in the workload and
groups of different kernels never collide.
"""
from __future__ import annotations

from dataclasses import replace

from harness.compiler import coordination as coord
from harness.compiler.index_analysis import variance_reason
from harness.compiler.report import CompileReport, Decision, KernelReport
from harness.gpu.isa_text import MNEMONIC, isa

REWRITES = {isa.LD_REMOTE: isa.LD_CAIS, isa.RED_REMOTE: isa.RED_CAIS}
NO_CAIS_FORM = {
    isa.ST_REMOTE: "a remote store has no CAIS form (stores to one address from every GPU do not merge)",
    isa.MM_LD_REDUCE: "a multimem operation is NVLS, not a unicast access",
    isa.MM_ST: "a multimem operation is NVLS, not a unicast access",
    isa.MM_RED: "a multimem operation is NVLS, not a unicast access",
    isa.DMA_COPY: "a copy-engine transfer, not an SM load or reduction",
    isa.DMA_REDUCE: "a copy-engine transfer, not an SM load or reduction",
    isa.DMA_PUSH: "a copy-engine transfer, not an SM load or reduction",
    isa.DMA_PUSH_REDUCE: "a copy-engine transfer, not an SM load or reduction",
}


def _workload(builder_or_workload):
    return getattr(builder_or_workload, "wl", builder_or_workload)


def next_free_group(wl) -> int:
    """The first group id above every group a CAIS-enabled kernel of `wl` already uses."""
    used = [k.cais.group_base + k.grid_x * k.grid_y for k in wl.kernels if k.cais.enabled]
    return max(used, default=0)


def participants(wl, ki: int) -> tuple[int, int, str]:
    """(first_gpu, num_gpus, '') of the GPUs kernel ki is launched on, or (0, 0, why not)."""
    sets = {tuple(sorted(la.gpus)) or tuple(range(wl.num_gpus)) for la in wl.launches if la.kernel == ki}
    if not sets:
        return 0, 0, "never launched"
    if len(sets) > 1:
        return 0, 0, f"launched on different GPU sets {sorted(sets)}: its TB groups would not match"
    gpus = sets.pop()
    if list(gpus) != list(range(gpus[0], gpus[0] + len(gpus))):
        return 0, 0, f"launched on GPUs {list(gpus)}, not a contiguous range"
    launches = sum(1 for la in wl.launches if la.kernel == ki)
    if launches > 1:
        return 0, 0, f"launched {launches} times: the launches would share its group ids"
    return gpus[0], len(gpus), ""


def _decide(wl, ins, pc: int) -> Decision | None:
    name = MNEMONIC[ins.op]
    if ins.op in (isa.LD_CAIS, isa.RED_CAIS):
        return Decision(pc, name, "kept")
    if ins.op == isa.FLAG_SIGNAL and ins.scope == isa.REMOTE:
        return Decision(pc, name, "refused", reason="a flag signal is synchronisation, not data")
    if ins.op in NO_CAIS_FORM:
        return Decision(pc, name, "refused", reason=NO_CAIS_FORM[ins.op])
    if ins.op not in REWRITES:
        return None  # local: untouched
    if wl.buffers[ins.buffer].multicast:
        return Decision(pc, name, "refused", reason=f"buffer '{wl.buffers[ins.buffer].name}' is a multicast "
                        "object, not the symmetric heap")
    why = variance_reason(ins)
    if why:
        return Decision(pc, name, "refused", reason=why)
    return Decision(pc, name, "rewritten", new_op=MNEMONIC[REWRITES[ins.op]])


def compile_kernel(wl, ki: int, num_gpus: int, coordination: coord.Coordination, group_base: int) -> KernelReport:
    k = wl.kernels[ki]
    rep = KernelReport(ki, k.name)
    first, n, why = participants(wl, ki)
    if not why and n != num_gpus:
        why = f"launched on {n} GPUs, not the {num_gpus} asked for"
    decisions = [d for pc, ins in enumerate(k.program) if (d := _decide(wl, ins, pc)) is not None]
    for g in k.warp_groups:  # the engine gives a warp-specialised CTA no TB group: report only
        decisions += [replace(d, group=g.name) for pc, ins in enumerate(g.program) if (d := _decide(wl, ins, pc))]
        why = why or "is warp-specialised (a CTA of warp groups has no CAIS TB group)"
    if why:
        rep.refused = why
        rep.decisions = [Decision(d.pc, d.op, "refused", reason=f"kernel {why}") if d.action == "rewritten" else d
                         for d in decisions]
        return rep
    rep.decisions = decisions
    for d in decisions:
        if d.action == "rewritten":
            k.program[d.pc].op = REWRITES[k.program[d.pc].op]
    if not any(d.action in ("rewritten", "kept") for d in decisions):
        return rep
    if not k.cais.enabled:
        k.cais.enabled, k.cais.group_base = True, group_base
    k.cais.num_gpus, k.cais.first_gpu = n, first
    rep.group_base, rep.groups, rep.first_gpu, rep.num_gpus = k.cais.group_base, k.grid_x * k.grid_y, first, n
    rep.sync_pc = coord.apply(k, coordination)
    return rep


def compile_cais(builder_or_workload, kernel_indices=None, num_gpus: int | None = None,
                 coordination: coord.Coordination = coord.Coordination()) -> CompileReport:
    """Run the pass over the kernels `kernel_indices` (default: all) of a WorkloadBuilder or an
    isa.Workload, in place; num_gpus: the GPUs a TB group spans (default: the workload's)."""
    wl = _workload(builder_or_workload)
    n = num_gpus or wl.num_gpus
    report = CompileReport()
    indices = range(len(wl.kernels)) if kernel_indices is None else kernel_indices
    for ki in sorted(set(indices)):
        if not 0 <= ki < len(wl.kernels):
            raise IndexError(f"compile_cais: no kernel {ki} (the workload has {len(wl.kernels)})")
        report.kernels.append(compile_kernel(wl, ki, n, coordination, next_free_group(wl)))
    return report
