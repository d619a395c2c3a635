"""The root Hydra schema: every key a run accepts, typed, with its default.

Hydra composes conf/config.yaml on top of this schema in struct mode, so an unknown key or a
value of the wrong type is refused before anything runs. Engine parameters are mounted from
harness.params (one dataclass per group, declared once).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Dict, Optional

from hydra.core.config_store import ConfigStore

from harness.config.run_dir import register_resolver
from harness.params import discover


@dataclass
class CosimConfig:
    """Co-simulation: engine processes, transport, time limits, faults, the progress line."""

    processes: int = 2
    """Engine processes, each hosting an even share of the GPUs and of the switches: both cores
    of a 2-core machine work in every window, and a GPU's links to the switches of its own
    process exchange nothing (docs/PERFORMANCE.md, "Engines per process"). Results do not
    depend on it (partition invariance)."""
    gpus_per_process: Optional[int] = None
    """Setting it or switches_per_process lays the engines out by kind instead (cosim.processes
    then does not apply): GPU engines of this many GPUs (unset: all of them)."""
    switches_per_process: Optional[int] = None
    """By-kind layout (see gpus_per_process): network engines of this many switches (unset: one)."""
    colocate: bool = False
    """Host every node in one process (the single-process reference for exactness tests)."""
    transport: str = "auto"
    """auto (shm for launcher=local when the build has the shm extension, else ipc), shm (shared
    memory: engines on this host that the harness starts), ipc (ZeroMQ over local sockets) or
    tcp (ZeroMQ; engines may run elsewhere)."""
    shm_spin_us: int = 1000
    """transport=shm: how long a waiting process spins (pause + sched_yield) before it sleeps
    (docs/PERFORMANCE.md: why 1000)."""
    tcp_host: str = "127.0.0.1"
    """Address the harness binds for transport=tcp (0.0.0.0 to accept remote engines)."""
    launcher: str = "local"
    """local: the harness starts the engines; manual: it prints their command lines and waits."""
    connect_timeout_s: float = 30.0
    """How long to wait for every engine to say hello."""
    reply_timeout_s: float = 5.0
    """An engine that does not answer a request within this time is declared hung."""
    max_sim_time_us: float = 1.0e7
    """Stop with an error if simulated time passes this (a runaway workload)."""
    fault: str = ""
    """Testing aid: ENGINE:KIND:WINDOW makes engine ENGINE crash|hang|garbage at that window."""
    watch: list[str] = field(default_factory=list)
    """Component name prefixes whose events are traced to stderr."""
    progress: str = "auto"
    """Progress line on stderr (simulated time, share of the work done, events per second) for
    runs longer than 2 s: auto (only when stderr is a terminal), true or false."""


@dataclass
class SystemConfig:
    """The machine: GPUs, switches, links and the node models the engines run."""

    name: str = "dgx_h100"
    """Name of the system (conf/system/<name>.yaml sets it)."""
    topology: str = "dgx"
    """dgx (GPUs x NVSwitch planes), xbar (one k-port router), fat_tree (leaf/spine switches)."""
    gpus: int = 8
    """GPUs in the system."""
    switches: int = 4
    """Switch planes (dgx) or leaf switches (fat_tree)."""
    lanes_per_switch: list[int] = field(default_factory=lambda: [5, 4, 4, 5])
    """NVLinks from each GPU to each switch plane (dgx)."""
    lane_bw_gbps: float = 25.0
    """Bandwidth of one NVLink lane, one direction, GB/s."""
    link_latency_ns: float = 250.0
    """GPU-switch (and switch-switch) link latency."""
    gpus_per_leaf: int = 8
    """fat_tree: GPUs under one leaf switch."""
    spines: int = 0
    """fat_tree: spine switches (0: as many as needed for full bisection)."""
    uplink_lanes: int = 18
    """fat_tree: lanes from a leaf to each spine."""
    gpu_model: str = "traffic"
    """GPU node model in the engine: traffic | hopper | collective | synthetic."""
    switch_model: str = "nvswitch"
    """Switch node model in the engine."""


@dataclass
class ModelConfig:
    name: str = "llama_7b"
    hidden: int = 4096
    ffn_hidden: int = 11264
    heads: int = 32
    seq_len: int = 3072
    batch: int = 3
    num_sms: int = 66
    """SMs per GPU the paper pairs with this model (half scale: 66); a layer run checks that
    gpu.num_sms (set by the system) agrees, so a half-scale model is not run on a full GPU by
    accident (set both to study another pairing)."""
    layers: int = 32
    """Transformer layers: end-to-end time = layers x layer time (the paper gives no counts; spec A3)."""


@dataclass
class ValidateConfig:
    """validate_* experiments: the rows to simulate beside their measurements."""

    input: Optional[str] = None
    """CSV of cases for validate_* experiments."""
    stats: bool = False
    """validate_collectives: also write <out_dir>/rows/<name>/stats.csv and series.csv per row."""
    kernels: str = "model"
    """validate_collectives: model (the NCCL-calibrated collective GPU model) or isa (NCCL's
    algorithms as tile-ISA kernels on the Hopper engine, harness/kernels: what schemes run)."""
    gemm: str = "cublas"
    """validate_kernels: cublas (each GEMM as cuBLAS ran it: its recorded plan, split-K and
    stream-K included, else the calibrated heuristic) or library (the data-parallel GEMM of
    harness/kernels/gemm.py that every scheme runs)."""


@dataclass
class CompareConfig:
    """experiment=compare: schemes side by side on one layer workload."""

    schemes: list[str] = field(default_factory=lambda: ["tp_nvls", "cais"])
    """Schemes to run (conf/scheme names), in the order of the table and figure."""
    baseline: str = "tp_nvls"
    """The scheme every speedup is relative to (one of compare.schemes)."""


@dataclass
class DriftConfig:
    """experiment=drift_sensitivity: each cross-GPU drift source scaled alone (docs/DRIFT.md)."""

    case: str = "ag_gemm"
    """ag_gemm: the ld.cais AG-GEMM of harness/gpu/ag_gemm.py (8 GPUs, pre-launch sync switchable);
    layer: the configured workload / model / phase lowered by the configured scheme (e.g. t3_nvls),
    whose sync is the scheme's own."""
    sources: list[str] = field(default_factory=lambda: ["launch_skew", "block_jitter", "tb_order", "clock_spread"])
    """Sources to scale: launch_skew (gpu.launch_skew_ns), block_jitter (gpu.block_jitter_frac),
    tb_order (gpu.tb_order_window), clock_spread (gpu.clock_spread_frac)."""
    levels: list[float] = field(default_factory=lambda: [0.0, 0.5, 1.0, 2.0])
    """Multiples of each source's reference value (the gpu.* default; tb_order: order_reference_window)."""
    order_reference_window: int = 18
    """Reference dispatch-order window: measured at 8 blocks per SM (a block overtaken by up to 17
    places); at one block per SM no reordering was measured, so the default window is 1. Level x
    gives the window max(1, round(x * this))."""
    sync: list[bool] = field(default_factory=lambda: [True, False])
    """case=ag_gemm: pre-launch group sync on and off."""
    m: int = 4096
    """case=ag_gemm: rows of A (a multiple of 8 x 128)."""
    n: int = 128
    """case=ag_gemm: columns of B (a multiple of 128). One column of blocks (128) requests every A
    line once per GPU, so each line is one merge session; with more, a GPU's second request can
    reach a session before another GPU's first and sessions end by timeout (issue 15, item 4)."""
    k: int = 512
    """case=ag_gemm: the inner dimension (a multiple of 64)."""
    sms: int = 8
    """case=ag_gemm: SMs per GPU its kernels may use (0: all of gpu.num_sms)."""
    seeds: list[int] = field(default_factory=lambda: [0])
    """Seeds of each point (rows per seed)."""


@dataclass
class CacheConfig:
    """The run cache (harness/run_cache.py): a run whose resolved config, code and input files
    were run before is copied from the cache instead of simulated."""

    enabled: bool = True
    """Look runs up in the cache and store finished ones."""
    dir: Optional[str] = None
    """Where entries live; null: $CAIS_CACHE_DIR, else $XDG_CACHE_HOME/cais-sim (~/.cache/cais-sim)."""


@dataclass
class FigureConfig:
    """Figure experiments (conf/experiment/fig*.yaml, table2): their points are the Hydra sweeper
    params of the experiment; each point is one ordinary run of point_task."""

    name: str = ""
    """The figure (harness/figures/<name>.py: how the points become its table and PNG)."""
    point_task: str = "simulate"
    """The experiment each point runs."""
    jobs: int = 1
    """Points run at once, each in a joblib worker process (0: one per CPU core). Results do not
    depend on it. A multirun (-m) uses hydra/launcher=joblib for the same."""
    axes: list[str] = field(default_factory=list)
    """Overrides with several values (scheme=a,b) of a run without -m; the CLI sets it from the
    command line (harness/sweep.py), each replacing that axis of the grid."""


@dataclass
class PaperConfig:
    """experiment=paper: every figure, one after another, each in <out_dir>/<figure>."""

    figures: list[str] = field(default_factory=lambda: ["fig2", "fig11", "fig12", "fig13", "fig14", "fig15",
                                                        "fig16", "fig17", "fig18", "table2"])
    """The figure experiments to run."""
    overrides: Dict[str, list[str]] = field(default_factory=dict)
    """Extra overrides per figure (figure name -> list of KEY=VALUE; conf/paper/tiny.yaml)."""


def _group_tree(groups: dict[str, type]) -> dict[str, Any]:
    tree: dict[str, Any] = {}
    for prefix, cls in groups.items():
        node = tree
        parts = prefix.split(".")
        for p in parts[:-1]:
            node = node.setdefault(p, {})
        node.setdefault(parts[-1], {})["__cls__"] = cls
    return tree


def _dataclass_for(name: str, spec: dict[str, Any]) -> type:
    """A dataclass for one node of the tree: its own fields plus nested groups."""
    base = spec.get("__cls__")
    nested = {k: _dataclass_for(k, v) for k, v in spec.items() if k != "__cls__"}  # one class each
    extra = [(k, cls, field(default_factory=cls)) for k, cls in nested.items()]
    if base is not None and not extra:
        return base
    bases = (base,) if base is not None else ()
    return dataclasses.make_dataclass(f"{name.title()}Group", extra, bases=bases)


def build_root() -> type:
    groups = discover()
    tree = _group_tree(groups)
    param_classes = {k: _dataclass_for(k, v) for k, v in tree.items()}
    param_fields = [(k, cls, field(default_factory=cls)) for k, cls in param_classes.items()]
    fixed = [
        ("task", str, field(default="simulate", metadata={"doc": "Experiment module run (experiment=NAME sets it)."})),
        ("seed", int, field(default=0, metadata={"doc": "Seed of every random choice in the engines."})),
        ("out_dir", Optional[str], field(default=None, metadata={
            "doc": "Folder for results.csv and what comes with it (a sweep: out_dir/N per point); "
                   "null: outputs/DATE/TIME-PID-RANDOM, never shared by two runs."})),
        ("phase", str, field(default="inference", metadata={"doc": "inference (prefill: the forward pass) or "
                                                            "training (forward, then backward) of a layer workload."})),
        ("workload", str, field(default="traffic", metadata={"doc": "traffic (the GPU model's own traffic), collective "
                                                             "(collective.op/algo/bytes as the library's kernel on the "
                                                             "Hopper engine), or an LLM layer lowered by a scheme: layer, "
                                                             "sublayer_l1..sublayer_l4 (docs/SCHEMES.md)."})),
        ("cosim", CosimConfig, field(default_factory=CosimConfig)),
        ("system", SystemConfig, field(default_factory=SystemConfig)),
        ("model", ModelConfig, field(default_factory=ModelConfig)),
        # A scheme's parameters are its module's dataclass (harness/schemes), checked at run start:
        # here a dict, so that each conf/scheme/<name>.yaml can carry its own keys.
        ("scheme", Dict[str, Any], field(default_factory=lambda: {"name": "none"}, metadata={
            "doc": "The scheme that lowers a layer workload (conf/scheme: name plus its own parameters, declared "
                   "by its module in harness/schemes; none for workload=traffic)."})),
        ("validate", ValidateConfig, field(default_factory=ValidateConfig)),
        ("compare", CompareConfig, field(default_factory=CompareConfig)),
        ("drift", DriftConfig, field(default_factory=DriftConfig)),
        ("cache", CacheConfig, field(default_factory=CacheConfig)),
        ("figure", FigureConfig, field(default_factory=FigureConfig)),
        ("paper", PaperConfig, field(default_factory=PaperConfig)),
    ]
    taken = {name for name, _, _ in fixed}
    clash = taken & {name for name, _, _ in param_fields}
    if clash:
        raise RuntimeError(f"parameter groups clash with root keys: {sorted(clash)}")
    return dataclasses.make_dataclass("RootConfig", fixed + param_fields)


def register() -> None:
    register_resolver()
    cs = ConfigStore.instance()
    cs.store(name="cais_schema", node=build_root())
