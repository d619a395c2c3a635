"""Tile ISA text form: parse + print round trip, affine evaluation, errors."""
import pytest

from harness.gpu import isa_text as t

SRC = """
.workload demo gpus=8
.buffer A bytes=33554432 dtype=bf16
.buffer C bytes=1024 multicast
.buffer R bytes=65536 dtype=fp32 arrivals=RFLAGS:8192
.buffer RFLAGS bytes=64
.kernel gemm grid=32x4 threads=256 regs=168 smem=131072
  .cais group_base=10 gpus=8 first=0 prelaunch preaccess
  loop 64 ; k loop
    ld.async buf=A addr=[16384*bx - 128*L0 + 5] rows=128 row_bytes=128 stride=8192
    ld.cais buf=A addr=[bx + L0] peer=[g + 1 % 8] rows=1 row_bytes=4096
    wait count=1
    mma m=128 n=128 k=64 dtype=bf16
  endloop
  alu elements=100 fpe=2.5
  multimem.ld_reduce buf=C addr=[128*bx] rows=1 row_bytes=128 reg=2
  alu elements=32 fpe=1.0 reg=2 src_reg=8
  multimem.st buf=C addr=[128*bx] rows=1 row_bytes=128 reg=2
  red.cais buf=A addr=[0] peer=[0] rows=1 row_bytes=128
  multimem.red buf=C addr=[128*bx] row_bytes=128 rows=1
  dma.copy buf=A src=A src_addr=[4096*g] peer=[g + 1 % 8] rows=1 row_bytes=4096
  dma.push.async buf=A src=A src_addr=[4096*bx] addr=[8192] peer=[g + 1 % 8] rows=2 row_bytes=4096
  dma.push_reduce buf=C src=A src_addr=[0] addr=[128*bx] rows=1 row_bytes=128
  flag.signal buf=C addr=[8*bx] value=1 scope=remote peer=[3]
  flag.wait buf=C addr=[8*bx] value=8
  cais.sync
  bar
.end
.kernel copy grid=16x1 threads=640 regs=64 smem=0
  .group scatter
    loop 4
      ld.async buf=A addr=[32768*bx + 4096*L0] rows=1 row_bytes=4096 reg=1
      wait scope=local
      st buf=C addr=[128*bx] rows=1 row_bytes=128 reg=1
    endloop
  .group gather
    flag.wait buf=C addr=[8*bx] value=8
.end
.launch gemm stream=0 priority=1 sms=0+66
.launch gemm gpus=0,1 stream=1 priority=0 after=0 dep=0:1/2:0:1 dep=0:all dep=0:row:1/1:0:0 dep=1:col:2/1:-1:1 start_ns=3.5
"""


def test_round_trip():
    w = t.parse(SRC)
    text = t.format(w)
    assert t.parse(text) == w
    assert t.format(t.parse(text)) == text
    k = w.kernels[0]
    assert k.program[0].op == t.isa.LOOP and k.program[0].count == 64
    assert k.program[1].is_async and k.program[1].rows == 128
    assert k.cais.enabled and k.cais.pre_launch_sync and k.cais.num_gpus == 8
    assert w.launches[1].deps[0].scale_den == 2
    d = w.launches[1].deps
    assert d[0].key == t.isa.LINEAR and d[2].key == t.isa.ROW and d[3].key == t.isa.COLUMN
    assert (d[3].producer, d[3].scale_num, d[3].scale_den, d[3].lo, d[3].hi) == (1, 2, 1, -1, 1)
    assert " dep=0:row:1/1:0:0 dep=1:col:2/1:-1:1" in text
    push = [i for i in k.program if i.op in (t.isa.DMA_PUSH, t.isa.DMA_PUSH_REDUCE)]
    assert [i.op for i in push] == [t.isa.DMA_PUSH, t.isa.DMA_PUSH_REDUCE]
    assert push[0].is_async and push[0].src_buffer == 0 and push[0].addr.base == 8192 and push[0].rows == 2
    assert push[1].buffer == 1 and push[1].addr.block_x == 128  # a multicast destination
    regs = [(i.op, i.reg, i.src_reg) for i in k.program if i.reg]
    assert regs == [(t.isa.MM_LD_REDUCE, 2, 0), (t.isa.ALU, 2, 8), (t.isa.MM_ST, 2, 0)]
    assert "alu elements=32 reg=2 src_reg=8 fpe=1.0" in text
    copy = w.kernels[1]
    assert not copy.program and [g.name for g in copy.warp_groups] == ["scatter", "gather"]
    assert [i.op for i in copy.warp_groups[0].program][:2] == [t.isa.LOOP, t.isa.LD]
    assert copy.warp_groups[1].program[0].op == t.isa.FLAG_WAIT
    assert "\n  .group gather\n    flag.wait" in text
    r = w.buffers[2]
    assert (r.arrival_flag_buffer, r.arrival_region_bytes) == (3, 8192)  # flag buffer declared after it
    assert " arrivals=RFLAGS:8192" in text and not w.buffers[0].arrival_region_bytes


def test_affine_eval_and_invariance():
    w = t.parse(SRC)
    ld = w.kernels[0].program[1]
    assert t.eval_affine(ld.addr, bx=2, loops=(3,)) == 5 + 2 * 16384 - 3 * 128
    assert ld.addr.gpu == 0  # GPU-invariant: a .cais candidate
    peer = w.kernels[0].program[2].peer
    assert [t.eval_affine(peer, g=g) for g in range(8)] == [1, 2, 3, 4, 5, 6, 7, 0]


@pytest.mark.parametrize("bad", [
    ".workload x\n.kernel k grid=1x1\n  frob buf=A\n.end",
    ".workload x\n.kernel k grid=1x1\n  ld buf=Nope\n.end",
    ".workload x\n.kernel k grid=1x1\n  endloop\n.end",
    ".workload x\n.buffer A bytes=8\n.kernel k grid=1x1\n  ld buf=A addr=[3*q]\n.end",
    ".workload x\n.buffer A bytes=4096 arrivals=F:0\n.buffer F bytes=8",
    ".workload x\n.buffer A bytes=4096 arrivals=Nope:128",
    ".workload x\n.group g",
    ".workload x\n.buffer A bytes=8\n.kernel k grid=1x1\n  bar\n  .group g\n  bar\n.end",
    ".workload x\n.kernel k grid=1x1\n  .group g\n  loop 2\n  .group h\n.end",
])
def test_errors_name_the_line(bad):
    with pytest.raises(t.IsaSyntaxError, match="line"):
        t.parse(bad)


def test_gpu_invariance_is_visible_to_a_compiler_pass():
    from harness.compiler.index_analysis import variance_reason
    w = t.parse(SRC)
    prog = w.kernels[0].program
    assert variance_reason(prog[1]) == ""       # ld A[16384*bx - 128*L0 + 5]: same on every GPU
    assert "peer" in variance_reason(prog[2])    # ld.cais from peer (g + 1) % 8: depends on the GPU
    w2 = t.parse(".workload x gpus=8\n.buffer A bytes=4096\n.kernel k grid=1x1\n"
                 "  ld.remote buf=A addr=[64*bx] peer=[3]\n  st buf=A addr=[64*g]\n"
                 "  red.remote buf=A addr=[64*bx] peer=[3]\n.end\n")
    assert variance_reason(w2.kernels[0].program[0]) == ""
    assert "address" in variance_reason(w2.kernels[0].program[1])
    assert w2.kernels[0].program[2].op == t.isa.RED_REMOTE and t.format(w2).count("red.remote") == 1


@pytest.mark.parametrize("text,bx,loops,want", [
    # tile t = bx + 132*L0, 7 tiles per row: offset = row*1000 + column*10
    ("[10*bx + 1320*L0 + 930*floor((bx + 132*L0) / 7)]", 5, (2,), 38 * 1000 + 3 * 10),
    ("[5 + floor((7 + bx) / 3)]", 9, (), 10),
    ("[-2*floor((by) / 4)]", 0, (), 0),
])
def test_quotient_terms_round_trip_and_evaluate(text, bx, loops, want):
    a = t.isa.Affine()
    t.parse_affine(text, a)
    assert t.format_affine(a) == text
    assert t.eval_affine(a, bx=bx, loops=loops) == want
