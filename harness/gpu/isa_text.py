"""Text form of the tile ISA (proto/isa.proto), for humans: parse and print, round-trip exact.

Example::

    .workload gemm_demo gpus=1
    .buffer A bytes=33554432 dtype=bf16
    .kernel gemm grid=32x32 threads=256 regs=168 smem=131072
      loop 64
        ld.async buf=A addr=[16384*bx + 128*L0] rows=128 row_bytes=128 stride=8192
        wait count=1
        mma m=128 n=128 k=64 dtype=bf16
      endloop
      st buf=C addr=[32768*by + 256*bx] rows=128 row_bytes=256 stride=8192
    .end
    .launch gemm stream=0 priority=0 sms=0+132

Directives: ``.workload NAME gpus=N [functional]``, ``.buffer NAME bytes=B [dtype=..]
[multicast] [l2_resident] [init_rank] [arrivals=FLAGS:REGION_BYTES]`` (init_rank: a functional
run starts every element at rank + 1; arrivals: a red.cais arrival counter: the
flag buffer FLAGS, declared anywhere, gets count x bytes per landed packet, 8 B per region),
``.kernel NAME grid=XxY threads= regs= smem= [cluster=N] [persistent [ctas=N] [dynamic]]
[l1_loads] [holds_carveout]`` (isa.proto Kernel.loads_via_l1, Kernel.holds_carveout),
``.cais group_base= gpus= first= [prelaunch] [preaccess]`` (inside a kernel), ``.group NAME
[warps=N]`` (inside a kernel: the instructions that follow, up to the next ``.group`` or ``.end``,
are that warp group's program, run by N warps, isa.proto Kernel.warp_groups), ``.end``,
``.launch KERNEL [gpus=0,1] [stream=] [priority=] [sms=FIRST+COUNT] [after=i,j] [start_ns=]
[dep=LAUNCH:all | dep=LAUNCH:[row:|col:]NUM/DEN:LO:HI]`` (LAUNCH = index of an earlier launch;
``row:`` / ``col:`` key the range on the consumer's block_y / block_x over the producer's rows /
columns of blocks, isa.proto TbDependency).

Instructions: ``MNEMONIC[.nc][.async] key=value ... [; comment]`` (``.nc``: a read-only remote load). Tile registers of functional
workloads (isa.proto Instr.reg): ``reg=N`` on a load, store, reduction, push or alu and
``src_reg=N`` on an alu (``alu reg=1 src_reg=2``: register 1 += register 2).
Edge tiles: ``in_rows=[...]`` on a memory op clips its rows per block (isa.proto
Instr.rows_in_bounds), ``in_bytes=[...]`` each row's bytes (Instr.row_bytes_in_bounds),
``wait_for=[...]`` gives a flag.wait a per-block threshold (value_of_block). Affine expressions are written in
brackets: ``[c0 + c1*bx + c2*by + c3*g + c4*L0 + c5*L1 ... % m]`` (L0 = outermost loop).
Buffers are referred to by name.
"""
from __future__ import annotations

import re
import shlex

from harness.errors import CaisError
from harness.protocol import load

isa = load("isa")

MNEMONIC = {
    isa.LD: "ld", isa.ST: "st", isa.LD_REMOTE: "ld.remote", isa.ST_REMOTE: "st.remote",
    isa.LD_CAIS: "ld.cais", isa.RED_CAIS: "red.cais", isa.RED_REMOTE: "red.remote", isa.MM_LD_REDUCE: "multimem.ld_reduce",
    isa.MM_ST: "multimem.st", isa.MM_RED: "multimem.red", isa.DMA_COPY: "dma.copy",
    isa.DMA_REDUCE: "dma.reduce", isa.MMA: "mma", isa.ALU: "alu", isa.BAR: "bar", isa.WAIT: "wait",
    isa.FLAG_WAIT: "flag.wait", isa.FLAG_SIGNAL: "flag.signal", isa.CAIS_SYNC: "cais.sync",
    isa.LOOP: "loop", isa.ENDLOOP: "endloop", isa.DMA_PUSH: "dma.push", isa.DMA_PUSH_REDUCE: "dma.push_reduce",
}
OPCODE = {v: k for k, v in MNEMONIC.items()}
DTYPES = {isa.FP16: "fp16", isa.BF16: "bf16", isa.FP32: "fp32", isa.FP8: "fp8"}
DTYPE_OF = {v: k for k, v in DTYPES.items()}
SCOPES = {isa.LOCAL: "local", isa.REMOTE: "remote"}
SCOPE_OF = {v: k for k, v in SCOPES.items()}
DEP_KEY_NAMES = {isa.ROW: "row", isa.COLUMN: "col"}  # LINEAR is written without a key
DEP_KEYS = {v: k for k, v in DEP_KEY_NAMES.items()}
DTYPE_BYTES = {isa.FP16: 2, isa.BF16: 2, isa.FP32: 4, isa.FP8: 1}

# Scalar instruction fields in print order: text key -> proto field.
_INT_FIELDS = [("rows", "rows"), ("row_bytes", "row_bytes"), ("stride", "row_stride"),
               ("m", "m"), ("n", "n"), ("k", "k"), ("elements", "elements"), ("value", "value"),
               ("count", "count"), ("reg", "reg"), ("src_reg", "src_reg")]
_AFFINE_FIELDS = [("addr", "addr"), ("peer", "peer"), ("src_addr", "src_addr"), ("in_rows", "rows_in_bounds"),
                  ("in_bytes", "row_bytes_in_bounds"), ("wait_for", "value_of_block")]


class IsaSyntaxError(CaisError):
    def __init__(self, line_no: int, line: str, why: str):
        super().__init__(f"isa text line {line_no}: {why}: {line.strip()!r}")


# ---------------------------------------------------------------- affine expressions
_TERM = re.compile(r"\s*([+-])?\s*(?:(\d+)\s*\*\s*)?(bx|by|g|L\d+|\d+)\s*")


_QUOT = re.compile(r"\s*([+-])?\s*(?:(\d+)\s*\*\s*)?floor\(\s*\(([^()]*)\)\s*/\s*(\d+)\s*\)\s*")


def affine_is_zero(a) -> bool:
    return not (a.base or a.block_x or a.block_y or a.gpu or any(a.loop) or a.modulo or len(a.quotient))


def _linear_terms(a, with_base: bool = True) -> str:
    terms: list[tuple[int, str]] = []
    if with_base and a.base:
        terms.append((a.base, ""))
    for coef, var in ((a.block_x, "bx"), (a.block_y, "by"), (a.gpu, "g")):
        if coef:
            terms.append((coef, var))
    for i, coef in enumerate(a.loop):
        if coef:
            terms.append((coef, f"L{i}"))
    out = ""
    for i, (coef, var) in enumerate(terms):
        sign = "-" if coef < 0 else "+"
        mag = abs(coef)
        body = str(mag) if not var else (var if mag == 1 else f"{mag}*{var}")
        out += (("-" if sign == "-" else "") if i == 0 else f" {sign} ") + body
    return out


def format_affine(a) -> str:
    """'[base + c*bx + ... + s*floor((linear) / d) % m]' (quotient terms: scale*floor((...)/divisor))."""
    out = _linear_terms(a)
    for q in a.quotient:
        inner = _linear_terms(q) or "0"
        mag = abs(q.scale)
        body = f"floor(({inner}) / {q.divisor})" if mag == 1 else f"{mag}*floor(({inner}) / {q.divisor})"
        sign = "-" if q.scale < 0 else "+"
        out = (f"-{body}" if sign == "-" else body) if not out else f"{out} {sign} {body}"
    if not out:
        out = "0"
    if a.modulo:
        out += f" % {a.modulo}"
    return f"[{out}]"


def _parse_linear(s: str, out, allow_first_sign_missing: bool = True) -> None:
    """Add the terms of a linear expression (constants, c*bx, c*by, c*g, c*Ln) to `out`."""
    pos = 0
    s = s.strip()
    loops: dict[int, int] = {}
    first = True
    while pos < len(s):
        m = _TERM.match(s, pos)
        if not m or m.end() == pos or (not first and m.group(1) is None):
            raise ValueError(f"bad affine term at '{s[pos:]}'")
        first = False
        pos = m.end()
        sign = -1 if m.group(1) == "-" else 1
        var = m.group(3)
        if var.isdigit():
            if m.group(2):
                raise ValueError("constant term with coefficient")
            out.base += sign * int(var)
            continue
        coef = sign * int(m.group(2) or 1)
        if var == "bx":
            out.block_x += coef
        elif var == "by":
            out.block_y += coef
        elif var == "g":
            out.gpu += coef
        else:
            idx = int(var[1:])
            loops[idx] = loops.get(idx, 0) + coef
    if loops:
        have = list(out.loop)
        n = max(len(have), max(loops) + 1)
        merged = [(have[i] if i < len(have) else 0) + loops.get(i, 0) for i in range(n)]
        del out.loop[:]
        out.loop.extend(merged)


def parse_affine(text: str, out) -> None:
    """Parse '[...]' into the Affine message `out`."""
    s = text.strip()
    if not (s.startswith("[") and s.endswith("]")):
        raise ValueError(f"affine expression must be in brackets: {text}")
    s = s[1:-1]
    out.Clear()
    out.SetInParent()
    if "%" in s:
        s, mod = s.split("%", 1)
        out.modulo = int(mod)
    linear = []
    pos = 0
    while True:  # cut the quotient terms out, parse the rest as a linear expression
        m = _QUOT.search(s, pos)
        if not m:
            linear.append(s[pos:])
            break
        linear.append(s[pos:m.start()])
        q = out.quotient.add(divisor=int(m.group(4)), scale=(-1 if m.group(1) == "-" else 1) * int(m.group(2) or 1))
        if q.divisor <= 0:
            raise ValueError("floor(.../d) needs d > 0")
        _parse_linear(m.group(3), q)
        pos = m.end()
    rest = " ".join(x.strip() for x in linear if x.strip())
    if rest.startswith("+"):
        rest = rest[1:]
    _parse_linear(rest, out)


def _eval_linear(a, bx: int, by: int, g: int, loops: tuple[int, ...]) -> int:
    v = a.base + a.block_x * bx + a.block_y * by + a.gpu * g
    for c, l in zip(a.loop, loops):
        v += c * l
    return v


def eval_affine(a, bx: int = 0, by: int = 0, g: int = 0, loops: tuple[int, ...] = ()) -> int:
    v = _eval_linear(a, bx, by, g, loops)
    for q in a.quotient:
        v += q.scale * (_eval_linear(q, bx, by, g, loops) // q.divisor)
    return v % a.modulo if a.modulo else v


# ---------------------------------------------------------------- instructions
def format_instr(ins, buffers: list[str]) -> str:
    name = MNEMONIC[ins.op] + (".nc" if ins.read_only else "") + (".async" if ins.is_async else "")
    if ins.op == isa.LOOP:
        return f"loop {ins.count}" + (f" ; {ins.comment}" if ins.comment else "")
    parts = [name]
    if ins.op in _BUFFER_OPS:
        parts.append(f"buf={buffers[ins.buffer]}")
    if ins.op in DMA_OPS:
        parts.append(f"src={buffers[ins.src_buffer]}")
    for key, field in _AFFINE_FIELDS:
        if ins.HasField(field):
            parts.append(f"{key}={format_affine(getattr(ins, field))}")
    for key, field in _INT_FIELDS:
        v = getattr(ins, field)
        if v:
            parts.append(f"{key}={v}")
    if ins.dtype:
        parts.append(f"dtype={DTYPES[ins.dtype]}")
    if ins.flops_per_element:
        parts.append(f"fpe={ins.flops_per_element!r}")
    if ins.scope:
        parts.append(f"scope={SCOPES[ins.scope]}")
    s = " ".join(parts)
    return s + (f" ; {ins.comment}" if ins.comment else "")


_BUFFER_OPS = {isa.LD, isa.ST, isa.LD_REMOTE, isa.ST_REMOTE, isa.LD_CAIS, isa.RED_CAIS, isa.RED_REMOTE,
               isa.MM_LD_REDUCE, isa.MM_ST, isa.MM_RED, isa.DMA_COPY, isa.DMA_REDUCE,
               isa.DMA_PUSH, isa.DMA_PUSH_REDUCE, isa.FLAG_WAIT, isa.FLAG_SIGNAL}
DMA_OPS = {isa.DMA_COPY, isa.DMA_REDUCE, isa.DMA_PUSH, isa.DMA_PUSH_REDUCE}  # with a source buffer
REMOTE_OPS = {isa.LD_REMOTE, isa.ST_REMOTE, isa.LD_CAIS, isa.RED_CAIS, isa.RED_REMOTE, *DMA_OPS}
_KV = re.compile(r"(\w+)=(\[[^\]]*\]|\S+)")


def parse_instr(text: str, buffers: dict[str, int], ins) -> None:
    body, _, comment = text.partition(";")
    body = body.strip()
    head, _, rest = body.partition(" ")
    if head.endswith(".async"):
        ins.is_async = True
        head = head[: -len(".async")]
    if head.endswith(".nc") and head[: -len(".nc")] in OPCODE:
        ins.read_only = True
        head = head[: -len(".nc")]
    if head not in OPCODE:
        raise ValueError(f"unknown mnemonic '{head}'")
    ins.op = OPCODE[head]
    if comment.strip():
        ins.comment = comment.strip()
    if ins.op == isa.LOOP:
        ins.count = int(rest.strip())
        return
    ints = dict(_INT_FIELDS)
    affs = dict(_AFFINE_FIELDS)
    consumed = _KV.sub("", rest).strip()
    if consumed:
        raise ValueError(f"cannot parse '{consumed}'")
    for key, val in _KV.findall(rest):
        if key == "buf":
            ins.buffer = _buffer(buffers, val)
        elif key == "src":
            ins.src_buffer = _buffer(buffers, val)
        elif key in affs:
            parse_affine(val, getattr(ins, affs[key]))
        elif key in ints:
            setattr(ins, ints[key], int(val))
        elif key == "dtype":
            ins.dtype = DTYPE_OF[val]
        elif key == "fpe":
            ins.flops_per_element = float(val)
        elif key == "scope":
            ins.scope = SCOPE_OF[val]
        else:
            raise ValueError(f"unknown operand '{key}'")


def _buffer(buffers: dict[str, int], name: str) -> int:
    if name not in buffers:
        raise ValueError(f"unknown buffer '{name}'")
    return buffers[name]


# ---------------------------------------------------------------- whole workloads
def _opts(tokens: list[str]) -> tuple[dict[str, str], set[str]]:
    kv, flags = {}, set()
    for t in tokens:
        if "=" in t:
            k, v = t.split("=", 1)
            kv[k] = v
        else:
            flags.add(t)
    return kv, flags


def parse(text: str):
    """Parse the text form into an isa.Workload message."""
    wl = isa.Workload()
    buffers: dict[str, int] = {}
    arrival_flags: list[tuple[int, str, object]] = []  # (line, flag buffer name, buffer): resolved at the end
    kernels: dict[str, int] = {}
    kernel = None
    program = None  # where instructions go: the kernel's program or its current warp group's
    depth = 0
    for no, line in enumerate(text.splitlines(), 1):
        s = line.strip()
        if not s or s.startswith("#") or s.startswith("//"):
            continue
        try:
            if s.startswith("."):
                toks = shlex.split(s.split(";")[0])
                d, args = toks[0], toks[1:]
                if d == ".workload":
                    wl.name = args[0]
                    kv, flags = _opts(args[1:])
                    wl.num_gpus = int(kv.get("gpus", 1))
                    wl.functional = "functional" in flags
                elif d == ".buffer":
                    kv, flags = _opts(args[1:])
                    b = wl.buffers.add(name=args[0], bytes=int(kv["bytes"]))
                    if "dtype" in kv:
                        b.dtype = DTYPE_OF[kv["dtype"]]
                    b.multicast = "multicast" in flags
                    b.l2_resident = "l2_resident" in flags
                    b.init_rank = "init_rank" in flags
                    if "arrivals" in kv:
                        flag_name, sep, region = kv["arrivals"].partition(":")
                        if not sep or not region.isdigit() or int(region) == 0:
                            raise ValueError("arrivals= needs FLAG_BUFFER:REGION_BYTES (bytes > 0)")
                        b.arrival_region_bytes = int(region)
                        arrival_flags.append((no, flag_name, b))
                    buffers[args[0]] = len(wl.buffers) - 1
                elif d == ".kernel":
                    kv, flags = _opts(args[1:])
                    kernel = wl.kernels.add(name=args[0])
                    gx, _, gy = kv.get("grid", "1x1").partition("x")
                    kernel.grid_x, kernel.grid_y = int(gx), int(gy or 1)
                    kernel.threads_per_block = int(kv.get("threads", 128))
                    kernel.regs_per_thread = int(kv.get("regs", 32))
                    kernel.smem_bytes = int(kv.get("smem", 0))
                    kernel.persistent = "persistent" in flags
                    kernel.dynamic_blocks = "dynamic" in flags
                    kernel.ctas = int(kv.get("ctas", 0))
                    kernel.cluster_ctas = int(kv.get("cluster", 0))
                    kernel.loads_via_l1 = "l1_loads" in flags
                    kernel.holds_carveout = "holds_carveout" in flags
                    kernels[args[0]] = len(wl.kernels) - 1
                    program = kernel.program
                    depth = 0
                elif d == ".group":
                    if kernel is None:
                        raise ValueError(".group outside a kernel")
                    if depth:
                        raise ValueError("loop not closed before .group")
                    if len(kernel.program):
                        raise ValueError("a kernel has a program or warp groups, not both")
                    kv, _ = _opts(args[1:])
                    program = kernel.warp_groups.add(name=args[0], warps=int(kv.get("warps", 0))).program
                elif d == ".cais":
                    if kernel is None:
                        raise ValueError(".cais outside a kernel")
                    kv, flags = _opts(args)
                    c = kernel.cais
                    c.enabled = True
                    c.group_base = int(kv.get("group_base", 0))
                    c.num_gpus = int(kv.get("gpus", 0))
                    c.first_gpu = int(kv.get("first", 0))
                    c.pre_launch_sync = "prelaunch" in flags
                    c.pre_access_sync = "preaccess" in flags
                elif d == ".end":
                    if depth:
                        raise ValueError("loop not closed before .end")
                    kernel = None
                elif d == ".launch":
                    kv, _ = _opts(args[1:])
                    la = wl.launches.add(kernel=kernels[args[0]])
                    if "gpus" in kv:
                        la.gpus.extend(int(x) for x in kv["gpus"].split(","))
                    la.stream = int(kv.get("stream", 0))
                    la.priority = int(kv.get("priority", 0))
                    if "sms" in kv:
                        f, _, c = kv["sms"].partition("+")
                        la.sm_first, la.sm_count = int(f), int(c)
                    if "after" in kv:
                        la.after.extend(int(x) for x in kv["after"].split(","))
                    la.start_ns = float(kv.get("start_ns", 0))
                    for dep in [t.split("=", 1)[1] for t in args[1:] if t.startswith("dep=")]:
                        parts = dep.split(":")
                        dd = la.deps.add(producer=int(parts[0]))
                        if parts[1] == "all":
                            dd.all_blocks = True
                        else:
                            if parts[1] in DEP_KEYS:
                                dd.key = DEP_KEYS[parts.pop(1)]
                            num, _, den = parts[1].partition("/")
                            dd.scale_num, dd.scale_den = int(num), int(den)
                            dd.lo, dd.hi = int(parts[2]), int(parts[3])
                else:
                    raise ValueError(f"unknown directive {d}")
            else:
                if kernel is None:
                    raise ValueError("instruction outside a kernel")
                ins = program.add()
                parse_instr(s, buffers, ins)
                depth += 1 if ins.op == isa.LOOP else -1 if ins.op == isa.ENDLOOP else 0
                if depth < 0:
                    raise ValueError("endloop without loop")
        except (ValueError, KeyError, IndexError) as e:
            raise IsaSyntaxError(no, line, str(e)) from None
    lines = text.splitlines()
    for no, flag_name, b in arrival_flags:
        if flag_name not in buffers:
            raise IsaSyntaxError(no, lines[no - 1], f"unknown arrival flag buffer '{flag_name}'")
        b.arrival_flag_buffer = buffers[flag_name]
    return wl


def format(wl) -> str:  # noqa: A001 - mirrors parse
    """Print an isa.Workload in the text form (parse(format(w)) == w)."""
    names = [b.name for b in wl.buffers]
    knames = [k.name for k in wl.kernels]
    out = [f".workload {wl.name or 'unnamed'} gpus={wl.num_gpus}" + (" functional" if wl.functional else "")]
    for b in wl.buffers:
        s = f".buffer {b.name} bytes={b.bytes}"
        if b.dtype:
            s += f" dtype={DTYPES[b.dtype]}"
        s += " multicast" * b.multicast + " l2_resident" * b.l2_resident + " init_rank" * b.init_rank
        if b.arrival_region_bytes:
            s += f" arrivals={names[b.arrival_flag_buffer]}:{b.arrival_region_bytes}"
        out.append(s)
    for k in wl.kernels:
        out.append(f".kernel {k.name} grid={k.grid_x}x{k.grid_y} threads={k.threads_per_block} "
                   f"regs={k.regs_per_thread} smem={k.smem_bytes}" + (f" cluster={k.cluster_ctas}" if k.cluster_ctas else "")
                   + (" persistent" if k.persistent else "") + (f" ctas={k.ctas}" if k.ctas else "")
                   + (" dynamic" if k.dynamic_blocks else "") + (" l1_loads" if k.loads_via_l1 else "")
                   + (" holds_carveout" if k.holds_carveout else ""))
        if k.cais.enabled:
            c = k.cais
            out.append(f"  .cais group_base={c.group_base} gpus={c.num_gpus} first={c.first_gpu}"
                       + " prelaunch" * c.pre_launch_sync + " preaccess" * c.pre_access_sync)
        programs = [(None, k.program, 0)] + [(g.name, g.program, g.warps) for g in k.warp_groups]
        for group, program, warps in programs:
            if group is not None:
                out.append(f"  .group {group}" + (f" warps={warps}" if warps else ""))
            depth = 1 if group is None else 2
            for ins in program:
                if ins.op == isa.ENDLOOP:
                    depth -= 1
                out.append("  " * depth + format_instr(ins, names))
                if ins.op == isa.LOOP:
                    depth += 1
        out.append(".end")
    for la in wl.launches:
        s = f".launch {knames[la.kernel]}"
        if la.gpus:
            s += " gpus=" + ",".join(map(str, la.gpus))
        s += f" stream={la.stream} priority={la.priority}"
        if la.sm_count:
            s += f" sms={la.sm_first}+{la.sm_count}"
        if la.after:
            s += " after=" + ",".join(map(str, la.after))
        if la.start_ns:
            s += f" start_ns={la.start_ns!r}"
        for d in la.deps:
            if d.all_blocks:
                s += f" dep={d.producer}:all"
            else:
                key = DEP_KEY_NAMES.get(d.key, "")
                s += f" dep={d.producer}:{key + ':' if key else ''}{d.scale_num}/{d.scale_den}:{d.lo}:{d.hi}"
        out.append(s)
    return "\n".join(out) + "\n"
