"""What the CAIS compiler pass did to a workload: per kernel, each remote access it rewrote or
refused (and why), the TB groups it formed and the coordination it inserted."""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Decision:
    pc: int            # program index before any CAIS_SYNC was inserted
    op: str            # mnemonic of the instruction as the pass found it
    action: str        # rewritten | refused | kept (already a .cais instruction)
    new_op: str = ""   # mnemonic after a rewrite
    reason: str = ""   # why it was refused
    group: str = ""    # the warp group whose program `pc` indexes ('' : the kernel's program)


@dataclass
class KernelReport:
    index: int
    name: str
    decisions: list[Decision] = field(default_factory=list)
    refused: str = ""          # why the whole kernel was left alone ('' if it was analysed)
    group_base: int = -1       # first TB-group id (-1: no groups)
    groups: int = 0            # TB groups: one per block index, each of num_gpus blocks
    first_gpu: int = 0
    num_gpus: int = 0
    sync_pc: int | None = None  # where a pre-access CAIS_SYNC was inserted

    def of(self, action: str) -> list[Decision]:
        return [d for d in self.decisions if d.action == action]


@dataclass
class CompileReport:
    kernels: list[KernelReport] = field(default_factory=list)

    def kernel(self, name: str) -> KernelReport:
        for k in self.kernels:
            if k.name == name:
                return k
        raise KeyError(name)

    @property
    def rewritten(self) -> list[tuple[str, Decision]]:
        return [(k.name, d) for k in self.kernels for d in k.of("rewritten")]

    @property
    def refused(self) -> list[tuple[str, Decision]]:
        return [(k.name, d) for k in self.kernels for d in k.of("refused")]

    def text(self) -> str:
        """One line per kernel and per decision, for logs and docs."""
        lines = []
        for k in self.kernels:
            if k.refused:
                lines.append(f"{k.name}: not compiled ({k.refused})")
                continue
            groups = (f"groups {k.group_base}..{k.group_base + k.groups - 1} over GPUs "
                      f"{k.first_gpu}..{k.first_gpu + k.num_gpus - 1}") if k.groups else "no groups"
            sync = f", cais.sync at pc {k.sync_pc}" if k.sync_pc is not None else ""
            lines.append(f"{k.name}: {groups}{sync}")
            for d in k.decisions:
                what = f"-> {d.new_op}" if d.action == "rewritten" else (d.reason or d.action)
                where = f"{d.group} pc {d.pc}" if d.group else f"pc {d.pc}"
                lines.append(f"  {where} {d.op}: {d.action} {what}".rstrip())
        return "\n".join(lines)
