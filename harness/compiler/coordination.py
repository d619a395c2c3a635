"""Merging-aware thread-block coordination the compiler attaches to a CAIS kernel (paper III-B2,
spec 3.5), each step a switch.

- Pre-launch synchronisation: kernel.cais.pre_launch_sync. The GPU's TB scheduler registers a
  block's group with the switch before dispatching it and dispatches it on release
  (external/gpu tb_scheduler.cc); the program is unchanged.
- Pre-access synchronisation: one CAIS_SYNC before the program's first .cais instruction and
  kernel.cais.pre_access_sync. If that instruction sits inside a loop the sync goes before the
  outermost enclosing LOOP, so a block synchronises once (spec 3.5: "After release the TB never
  synchronises again"). The engine sends one SYNC_REQ per block and holds the whole block until
  the release (block_executor.cc exec_cais_sync): instructions before the sync have been issued
  (their asynchronous loads keep flowing), but independent instructions after it do not issue
  while it waits, which the paper's warp scheduler would allow.
- Request throttling is not the compiler's business: it is the switch's
  `net.cais_merge.throttle` (and its thresholds), set in a scheme's YAML.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.gpu.isa_text import isa

CAIS_OPS = (isa.LD_CAIS, isa.RED_CAIS)


@dataclass(frozen=True)
class Coordination:
    """Which TB-coordination steps a compiled kernel carries."""
    pre_launch: bool = False
    """Register each block's TB group with the switch before dispatch (kernel.cais.pre_launch_sync)."""
    pre_access: bool = False
    """One CAIS_SYNC before the first .cais access of the program (kernel.cais.pre_access_sync)."""


def sync_point(program) -> int | None:
    """Where a pre-access CAIS_SYNC goes: before the first .cais instruction, hoisted out of the
    loops around it; None when the program has no .cais instruction."""
    open_loops: list[int] = []
    for pc, ins in enumerate(program):
        if ins.op == isa.LOOP:
            open_loops.append(pc)
        elif ins.op == isa.ENDLOOP and open_loops:
            open_loops.pop()
        elif ins.op in CAIS_OPS:
            return open_loops[0] if open_loops else pc
    return None


def insert_pre_access_sync(kernel) -> int | None:
    """Insert the CAIS_SYNC into `kernel` (once: a program that has one keeps it); returns its pc,
    or None when the program has no .cais instruction."""
    for pc, ins in enumerate(kernel.program):
        if ins.op == isa.CAIS_SYNC:
            return pc
    pc = sync_point(kernel.program)
    if pc is None:
        return None
    tail = [isa.Instr() for _ in range(len(kernel.program) - pc)]
    for t, ins in zip(tail, kernel.program[pc:]):
        t.CopyFrom(ins)
    del kernel.program[pc:]
    kernel.program.add(op=isa.CAIS_SYNC, comment="pre-access sync (CAIS compiler)")
    kernel.program.extend(tail)
    return pc


def apply(kernel, coordination: Coordination) -> int | None:
    """Set the kernel's coordination switches; returns the pc of an inserted CAIS_SYNC."""
    kernel.cais.pre_launch_sync = coordination.pre_launch
    kernel.cais.pre_access_sync = coordination.pre_access
    return insert_pre_access_sync(kernel) if coordination.pre_access else None
