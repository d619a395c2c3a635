"""A transformer layer (or one of the paper's sub-layers L1-L4) as an operator graph.

Pre-LN GPT/Megatron layer (spec section 1.2): LN1 -> QKV -> attention -> out-proj -> (+res) ->
LN2 -> FFN1 (activation fused) -> FFN2 -> (+res). Tensor parallelism (``tp``): QKV and FFN1
column-parallel, out-proj and FFN2 row-parallel with an AllReduce of their partial outputs; LN on
all T rows. Sequence parallelism (``sp``, Korthikanti et al.): the AllReduce becomes a
ReduceScatter, LN runs on the T/N-row shard and an AllGather precedes each column-parallel GEMM.

Backward (training): dgrad and wgrad GEMMs in reverse order, attention backward, LN backward;
the AllReduce (tp) or ReduceScatter (sp) follows the column-parallel dgrads, the AllGather of the
output gradient precedes the row-parallel dgrads, and in sp the LN outputs are re-gathered for
the wgrad GEMMs (Megatron's implementation, spec section 1.2).

`workload=layer` is one period of a stack of identical layers, cut where no scheme communicates or
overlaps: at attention's input, which is the QKV output every GPU holds for its own heads. The
forward period runs attention -> out-proj -> LN2 -> FFN1 -> FFN2 -> LN1 and QKV of the next layer;
the backward period (training, after the forward one) runs attention backward -> QKV dgrad -> LN1
backward -> FFN2 and FFN1 dgrad of the previous layer -> LN2 backward -> out-proj dgrad. So the
chains that cross a layer boundary (L2 forward, L4 backward: a GEMM-RS, LN and AG-GEMM that CAIS
pipelines and T3 overlaps) run whole, as they do in the model, and the end-to-end time is
`model.layers` x this period (spec section 1.3: "L2's QKV belongs to the next layer"). Cut at
LN1 instead, a layer would start with a gather nothing overlaps and end with a reduction no
consumer waits for.

Sub-layers (spec section 1.3; paper V-A2): L1 out-proj -> LN2 -> FFN1 (fwd); L2 FFN2 -> LN1 ->
QKV of the next layer (fwd); L3 FFN1 dgrad -> LN2 bwd -> out-proj dgrad; L4 QKV dgrad -> LN1 bwd
-> FFN2 dgrad of the previous layer. A sub-layer runs from its producer GEMM's start to its
consumer GEMM's end.
"""
from __future__ import annotations

from harness.errors import ConfigError
from harness.workload.graph import Attention, Collective, Gemm, Graph, Norm
from harness.workload.models import ModelDims

PHASES = ("inference", "training")
WORKLOADS = ("layer", "sublayer_l1", "sublayer_l2", "sublayer_l3", "sublayer_l4")
PARTITIONS = ("tp", "sp")
BACKWARD_SUBLAYERS = ("sublayer_l3", "sublayer_l4")


def attention_shape(m: ModelDims, gpus: int) -> tuple[int, int]:
    """(batch x heads on one GPU, head dim). A non-integer head dim (Mega-GPT-4B: 2048/24) keeps
    the FLOPs 4 b s^2 h/N exact with heads of 128 (spec A2)."""
    width = m.hidden // gpus
    if m.hidden % m.heads == 0:
        return m.batch * (m.heads // gpus), m.hidden // m.heads
    if width % 128:
        raise ConfigError("model.heads", f"head dim {m.hidden}/{m.heads} is not an integer and h/N = {width} "
                          "is not a multiple of 128")
    return m.batch * (width // 128), 128


class _Builder:
    """Appends the layer's ops to a graph, naming the collectives after the partition."""

    def __init__(self, m: ModelDims, gpus: int, partition: str, g: Graph):
        self.m, self.N, self.sp, self.g = m, gpus, partition == "sp", g
        self.T, self.h, self.f = m.tokens, m.hidden, m.ffn_hidden
        self.ln_rows = self.T // gpus if self.sp else self.T

    def reduce(self, name: str, dep: str) -> str:
        kind = "reduce_scatter" if self.sp else "all_reduce"
        return self.g.add(Collective(name, kind, self.T, self.h, (dep,))).name

    def gather(self, name: str, dep: str) -> str:
        """An AllGather in sp; in tp the LN output is already whole: no op, the dep passes on."""
        if not self.sp:
            return dep
        return self.g.add(Collective(name, "all_gather", self.T, self.h, (dep,))).name

    def forward(self, after: str | None = None) -> str:
        """One forward period: attention of layer i to the QKV GEMM of layer i + 1 (module doc)."""
        g, T, h, f, N = self.g, self.T, self.h, self.f, self.N
        bh, d = attention_shape(self.m, N)
        attn = g.add(Attention("attn", bh, self.m.seq_len, d, (after,) if after else ())).name
        proj = g.add(Gemm("out_proj", T, h, h // N, (attn,), out_partial=True, sharded="K")).name
        r1 = self.reduce("reduce_attn", proj)
        ln2 = g.add(Norm("ln2", self.ln_rows, h, (r1,))).name
        x2 = self.gather("ag_ln2", ln2)
        ffn1 = g.add(Gemm("ffn1", T, f // N, h, (x2,), a_gathered=self.sp)).name
        ffn2 = g.add(Gemm("ffn2", T, h, f // N, (ffn1,), out_partial=True, sharded="K")).name
        r2 = self.reduce("reduce_ffn", ffn2)
        ln1 = g.add(Norm("ln1", self.ln_rows, h, (r2,))).name  # LN1 of layer i + 1
        x1 = self.gather("ag_ln1", ln1)
        return g.add(Gemm("qkv", T, 3 * h // N, h, (x1,), a_gathered=self.sp)).name

    def backward(self, after: str | None) -> str:
        """One backward period: attention backward of layer i to the out-proj dgrad of layer i - 1."""
        g, T, h, f, N = self.g, self.T, self.h, self.f, self.N
        bh, d = attention_shape(self.m, N)
        attn_b = g.add(Attention("attn_bwd", bh, self.m.seq_len, d, (after,) if after else (), backward=True)).name
        qkv_d = g.add(Gemm("qkv_dgrad", T, h, 3 * h // N, (attn_b,), out_partial=True, sharded="K")).name
        r2 = self.reduce("reduce_qkv_dgrad", qkv_d)
        if self.sp:
            x1 = g.add(Collective("ag_ln1_regather", "all_gather", T, h, (attn_b,), data="ln1")).name
            g.add(Gemm("qkv_wgrad", h, 3 * h // N, T, (attn_b, x1), wgrad=True))
        else:
            g.add(Gemm("qkv_wgrad", h, 3 * h // N, T, (attn_b,), wgrad=True))
        ln1_b = g.add(Norm("ln1_bwd", self.ln_rows, h, (r2,), backward=True)).name
        dy2 = self.gather("ag_dy_ffn", ln1_b)  # the output gradient of layer i - 1, from here on
        ffn2_d = g.add(Gemm("ffn2_dgrad", T, f // N, h, (dy2,), a_gathered=self.sp)).name
        g.add(Gemm("ffn2_wgrad", f // N, h, T, (dy2,), wgrad=True, sharded="M"))
        ffn1_d = g.add(Gemm("ffn1_dgrad", T, h, f // N, (ffn2_d,), out_partial=True, sharded="K")).name
        r1 = self.reduce("reduce_ffn1_dgrad", ffn1_d)
        if self.sp:
            x2 = g.add(Collective("ag_ln2_regather", "all_gather", T, h, (ffn2_d,), data="ln2")).name
            g.add(Gemm("ffn1_wgrad", h, f // N, T, (ffn2_d, x2), wgrad=True))
        else:
            g.add(Gemm("ffn1_wgrad", h, f // N, T, (ffn2_d,), wgrad=True))
        ln2_b = g.add(Norm("ln2_bwd", self.ln_rows, h, (r1,), backward=True)).name
        dy1 = self.gather("ag_dy_attn", ln2_b)
        proj_d = g.add(Gemm("out_proj_dgrad", T, h // N, h, (dy1,), a_gathered=self.sp)).name
        g.add(Gemm("out_proj_wgrad", h // N, h, T, (dy1,), wgrad=True, sharded="M"))
        return proj_d

    # ---- sub-layers: producer GEMM -> reduction -> LN -> gather -> consumer GEMM
    def sublayer(self, producer: Gemm, ln_name: str, backward: bool, consumer: Gemm) -> None:
        g = self.g
        p = g.add(producer).name  # producer: row-parallel (sharded K, partial output)
        r = self.reduce(f"reduce_{producer.name}", p)
        ln = g.add(Norm(ln_name, self.ln_rows, self.h, (r,), backward=backward)).name
        x = self.gather(f"ag_{ln_name}", ln)
        g.add(Gemm(consumer.name, consumer.M, consumer.N, consumer.K, (x,), a_gathered=self.sp, sharded=consumer.sharded))
        g.sublayers[g.name] = (producer.name, consumer.name)


def build(m: ModelDims, phase: str, workload: str, partition: str, gpus: int) -> Graph:
    """The graph of `workload` for `phase` at TP degree `gpus` with `partition` (tp | sp)."""
    if phase not in PHASES:
        raise ConfigError("phase", f"unknown phase '{phase}' (choices: {', '.join(PHASES)})")
    if workload not in WORKLOADS:
        raise ConfigError("workload", f"unknown workload '{workload}' (choices: traffic, collective, {', '.join(WORKLOADS)})")
    if partition not in PARTITIONS:
        raise ValueError(f"unknown partition '{partition}'")
    if phase == "inference" and workload in BACKWARD_SUBLAYERS:
        raise ConfigError("workload", f"{workload} is a backward sub-layer: it needs phase=training "
                          "(inference prefill has only sublayer_l1 and sublayer_l2)")
    m.check_tp(gpus)
    g = Graph(name=workload, gpus=gpus, partition=partition)
    b = _Builder(m, gpus, partition, g)
    T, h, f, N = m.tokens, m.hidden, m.ffn_hidden, gpus
    if workload == "layer":
        out = b.forward()
        if phase == "training":
            b.backward(out)
    elif workload == "sublayer_l1":
        b.sublayer(Gemm("out_proj", T, h, h // N, out_partial=True, sharded="K"), "ln2", False, Gemm("ffn1", T, f // N, h))
    elif workload == "sublayer_l2":
        b.sublayer(Gemm("ffn2", T, h, f // N, out_partial=True, sharded="K"), "ln1_next", False, Gemm("qkv_next", T, 3 * h // N, h))
    elif workload == "sublayer_l3":
        b.sublayer(Gemm("ffn1_dgrad", T, h, f // N, out_partial=True, sharded="K"), "ln2_bwd", True,
                   Gemm("out_proj_dgrad", T, h // N, h))
    else:
        b.sublayer(Gemm("qkv_dgrad", T, h, 3 * h // N, out_partial=True, sharded="K"), "ln1_bwd", True,
                   Gemm("ffn2_dgrad_prev", T, f // N, h))
    return g
