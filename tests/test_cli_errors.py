"""Bad input and bad surroundings end a run with one line, a non-zero exit and no results;
nonsense runs are refused instead of succeeding with nothing to show."""
from __future__ import annotations

import json
import os
import resource
import subprocess
from pathlib import Path

import pandas as pd
import pytest

from harness import REPO_ROOT
from harness.errors import ConfigError
from harness.experiments import validate_collectives as vc
from tests.conftest import CAIS_SIM, compose, run_cli

TINY_TRAFFIC = ["traffic.requests_per_gpu=100", "traffic.max_outstanding=8"]
HEADER = "name,op,bytes,gpus,algo"


def one_error_line(proc, *expected: str) -> str:
    assert proc.returncode not in (0, None), proc.stdout
    lines = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("cais-sim: error: "), lines[0]
    for text in expected:
        assert text in lines[0], lines[0]
    return lines[0]


def unwritable_dir(tmp_path: Path) -> Path:
    if os.geteuid() == 0:  # root writes anywhere chmod allows: use a file system that refuses mkdir
        return Path("/sys/cais-sim-test-out")
    d = tmp_path / "locked"
    d.mkdir(mode=0o500)
    return d / "out"


def test_out_dir_that_cannot_be_created(tmp_path):
    out = unwritable_dir(tmp_path)
    one_error_line(run_cli(*TINY_TRAFFIC, f"out_dir={out}", check=False, timeout=60), f"out_dir: cannot create {out}")


def test_out_dir_that_is_a_file(tmp_path):
    f = tmp_path / "file"
    f.write_text("x")
    one_error_line(run_cli(*TINY_TRAFFIC, f"out_dir={f}", check=False, timeout=60), f"out_dir: {f} is a file")
    assert f.read_text() == "x"


def test_disk_full_while_writing_results(engines, tmp_path):
    """A file-size limit makes writes fail as a full disk does (EFBIG; Python ignores SIGXFSZ).
    Over ipc: the limit also caps the shared-memory segment."""
    out = tmp_path / "full"
    limit = lambda: resource.setrlimit(resource.RLIMIT_FSIZE, (4096, 4096))  # stats.csv is larger
    proc = subprocess.run([*CAIS_SIM, *TINY_TRAFFIC, "cosim.transport=ipc", f"out_dir={out}"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=120, preexec_fn=limit)
    one_error_line(proc, "out_dir: cannot write", "stats.csv", "File too large")
    assert not (out / "results.csv").exists()
    assert [p.name for p in out.iterdir() if p.name.endswith(".tmp")] == []  # no half-written temp file


@pytest.mark.parametrize("body,expected", [
    ("", "is empty"),
    (HEADER + "\n", "has a header but no rows"),
    (HEADER + "\nar,all_reduce,64MiB,2,ring\n", "line 2 (name ar): bytes '64MiB' is not allowed"),
    (HEADER + "\nok,all_reduce,1024,2,ring\nneg,all_reduce,-1024,2,ring\n", "line 3 (name neg): bytes '-1024'"),
    (HEADER + "\nsolo,all_reduce,1024,1,ring\n", "line 2 (name solo): gpus '1' is not allowed"),
    ("name,op,bytes\nx,all_reduce,1\n", "lacks columns ['gpus', 'algo']"),
    (HEADER + "\nar,all_reduce,1024,2,ring,extra\n", "line 2 has 6 fields, the header 5"),
])
def test_bad_collective_rows_are_named(tmp_path, body, expected):
    rows = tmp_path / "rows.csv"
    rows.write_text(body)
    line = one_error_line(run_cli("experiment=validate_collectives", f"validate.input={rows}",
                                  f"out_dir={tmp_path / 'o'}", check=False, timeout=60), "validate.input:", expected)
    assert str(rows) in line
    assert not (tmp_path / "o" / "results.csv").exists()


def test_bad_kernel_rows_are_named(tmp_path):
    rows = tmp_path / "k.csv"
    rows.write_text("name,kind,M,N,K,num_sms\ng,gemm,1024,1k,64,132\n")
    one_error_line(run_cli("experiment=validate_kernels", f"validate.input={rows}", f"out_dir={tmp_path / 'o'}",
                           check=False, timeout=60), f"{rows} line 2 (name g): N '1k'")


@pytest.mark.parametrize("experiment", ["validate_kernels", "validate_collectives", "validate_concurrent",
                                        "validate_overlap"])
def test_an_input_that_is_no_file_is_named(tmp_path, experiment):
    one_error_line(run_cli(f"experiment={experiment}", f"validate.input={tmp_path}", f"out_dir={tmp_path / 'o'}",
                           check=False, timeout=60), f"validate.input: {tmp_path} is not a file; allowed: a CSV file")
    one_error_line(run_cli(f"experiment={experiment}", f"validate.input={tmp_path / 'no.csv'}",
                           f"out_dir={tmp_path / 'o'}", check=False, timeout=60),
                   f"validate.input: {tmp_path / 'no.csv'} not found; allowed: a CSV file")


def test_unbindable_tcp_host(engines, tmp_path):
    one_error_line(run_cli(*TINY_TRAFFIC, "cosim.transport=tcp", "cosim.tcp_host=192.0.2.1", f"out_dir={tmp_path}",
                           check=False, timeout=60), "cosim.tcp_host: cannot bind '192.0.2.1'")


def test_unknown_key_in_a_sweep(tmp_path):
    proc = run_cli("-m", "seed=1,2", "no_such_key=3", f"out_dir={tmp_path}", check=False, timeout=60)
    one_error_line(proc, "no_such_key: unknown config key")
    assert not list(tmp_path.iterdir())  # no point ran


@pytest.mark.parametrize("args", [["+foo=1"], ["++foo=1"], ["++gpu.no_such=2"], ["-m", "+foo=1,2"]])
def test_a_key_hydra_would_append_is_as_unknown_as_a_misspelt_one(tmp_path, args):
    key = args[-1].lstrip("+").partition("=")[0]
    one_error_line(run_cli(*args, f"out_dir={tmp_path}", check=False, timeout=60), f"{key}: unknown config key")
    assert not list(tmp_path.iterdir())


def test_a_joblib_sweep_of_no_workers_is_refused_before_it_starts(tmp_path):
    # joblib raises inside Hydra's launcher (a traceback) once the points are handed to it
    proc = run_cli("-m", "seed=1,2", "hydra/launcher=joblib", "hydra.launcher.n_jobs=0", f"out_dir={tmp_path}",
                   check=False, timeout=60)
    one_error_line(proc, "hydra.launcher.n_jobs: 0 runs nothing in joblib", "-1 for one per core")
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("launcher,module", [("ray", "hydra_plugins.hydra_ray_launcher"),
                                             ("slurm", "hydra_plugins.hydra_submitit_launcher")])
def test_a_cluster_launcher_whose_plugin_is_missing_is_one_line(tmp_path, launcher, module):
    import importlib.util

    try:
        installed = importlib.util.find_spec(module) is not None
    except ImportError:
        installed = False
    if installed:
        pytest.skip(f"{module} is installed here")
    proc = run_cli("-m", "seed=1,2", f"hydra/launcher={launcher}", f"out_dir={tmp_path}", check=False, timeout=60)
    one_error_line(proc, f"hydra/launcher: its Hydra plugin ({module}.", "pip install '.[cluster]'")
    assert not list(tmp_path.iterdir())


def test_a_paper_of_no_figures_is_refused(tmp_path):
    proc = run_cli("experiment=paper", "paper.figures=[]", f"out_dir={tmp_path}", check=False, timeout=60)
    one_error_line(proc, "paper.figures: is empty; give at least one figure experiment")
    assert not (tmp_path / "results.csv").exists()


def test_a_failed_sweep_point_does_not_stop_the_sweep(engines, tmp_path):
    proc = run_cli("-m", *TINY_TRAFFIC, "cosim.transport=udp,ipc", f"out_dir={tmp_path}", check=False, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    assert "cais-sim: error: point #0 (" in proc.stderr and "cosim.transport: 'udp' is not one of" in proc.stderr
    assert "sweep: 1 of 2 points succeeded" in proc.stderr
    assert not (tmp_path / "0" / "results.csv").exists()
    assert (tmp_path / "1" / "results.csv").exists()  # the point after the failed one ran


def test_a_file_where_a_point_or_figure_folder_goes_is_named(engines, tmp_path):
    (tmp_path / "fig11").mkdir()
    (tmp_path / "fig11" / "0").write_text("")  # point 0's folder
    proc = run_cli("experiment=fig11", "model=tiny", "phase=inference", "scheme=tp_nvls,cais",
                   f"out_dir={tmp_path / 'fig11'}", check=False, timeout=300)
    assert proc.returncode == 1 and "internal error" not in proc.stderr and "Traceback" not in proc.stderr
    assert f"failed #0 (model=tiny phase=inference scheme=tp_nvls): out_dir: {tmp_path / 'fig11' / '0'} is a file" \
        in proc.stderr
    assert (tmp_path / "fig11" / "1" / "results.csv").is_file()  # the other point ran
    (tmp_path / "paper").mkdir()
    (tmp_path / "paper" / "fig2").write_text("")  # the paper's first figure's folder
    one_error_line(run_cli("experiment=paper", "paper=tiny", f"out_dir={tmp_path / 'paper'}", check=False, timeout=60),
                   f"out_dir: {tmp_path / 'paper' / 'fig2'} is a file")


def test_a_figure_none_of_whose_points_finished_exits_1_without_a_traceback(engines, tmp_path):
    # every point is refused at its start: the summary names each, the figure has no rows
    proc = run_cli("experiment=fig18", "collective.bytes=-5", f"out_dir={tmp_path}", check=False, timeout=120)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "sweep: 0 of 1 points succeeded" in proc.stderr
    assert "collective.bytes: must be >= 1, got -5" in proc.stderr
    assert json.loads((tmp_path / "figure.json").read_text())["failed"]


@pytest.mark.parametrize("override,expected", [
    ("traffic.request_bytes=0", "traffic.request_bytes: must be 1..128"),
    ("traffic.requests_per_gpu=0", "traffic.requests_per_gpu: must be >= 1"),
    ("system.gpus=1", "system.gpus: must be >= 2"),
    ("system.gpu_model=hopper", "system.gpu_model: hopper runs tile-ISA kernels"),
    ("seed=-1", "seed: must be 0 to 18446744073709551615, got -1"),
    ("cosim.max_sim_time_us=0", "cosim.max_sim_time_us: must be > 0, got 0.0"),
    ("seed=18446744073709551616", "seed: must be 0 to 18446744073709551615, got 18446744073709551616"),
    # a packet larger than a VC never gets its credits: it was a deadlock at run time
    ("net.vc_depth_flits=4", "net.vc_depth_flits: is 4 flits but a packet of traffic.request_bytes=128 is 9 flits "
                             "and must fit one VC; allowed: >= 9"),
])
def test_nonsense_runs_are_refused(engines, tmp_path, override, expected):
    one_error_line(run_cli(*TINY_TRAFFIC, override, f"out_dir={tmp_path}", check=False, timeout=60), expected)
    assert not (tmp_path / "results.csv").exists()


def test_ladm_refuses_weight_gradients_whose_rows_do_not_split_into_whole_home_tiles(tmp_path):
    one_error_line(run_cli("model=tiny", "model.hidden=320", "model.heads=10", "model.ffn_hidden=1280",
                           "model.seq_len=256", "model.batch=5", "system=dgx_h100_half", "system.gpus=2", "scheme=ladm",
                           "phase=training", "workload=layer", f"out_dir={tmp_path}", check=False, timeout=60),
                   "model: scheme 'ladm' makes each GPU home to 256 rows (whole tiles) of the weight gradient "
                   "'qkv_wgrad', but it has 320 rows; allowed: a model whose weight gradients' rows are a multiple of 256")
    assert not (tmp_path / "results.csv").exists()


def test_coconet_refuses_a_channel_count_its_chunks_do_not_split_into(tmp_path):
    one_error_line(run_cli("model=tiny", "model.heads=4", "model.hidden=128", "model.ffn_hidden=512",
                           "model.seq_len=512", "model.batch=1", "system=dgx_h100_half", "system.gpus=4",
                           "scheme=coconet", "scheme.channels=3", "scheme.chunks=4", "workload=sublayer_l1",
                           f"out_dir={tmp_path}", check=False, timeout=60),
                   "scheme.channels: scheme 'coconet' cuts 'reduce_out_proj' (131072 B) into 4 chunks x 3 channels x "
                   "4 GPUs of whole 128 B lines, which it does not split into; allowed: 1, 2, 4, 8, 16, 32, 64")


@pytest.mark.parametrize("scheme,gpus,expected", [
    # FuseLib's owners each reduce 1/N of a tile's rows: it was an internal error (a ValueError)
    ("fuselib", 6, "system.gpus: scheme 'fuselib' has each of the 6 GPUs reduce 1/6 of the rows of every 128-row "
                   "tile of 'out_proj'; allowed: a GPU count that divides 128"),
    ("fuselib_nvls", 3, "system.gpus: scheme 'fuselib_nvls' has each of the 3 GPUs reduce 1/3"),
    ("fuselib", 16, "system.gpus: scheme 'fuselib' has the owner sum the 16 GPUs' partials in its 8 tile registers; "
                    "allowed: at most 8 GPUs"),
])
def test_a_gpu_count_a_scheme_cannot_split_its_tiles_over_is_refused(tmp_path, scheme, gpus, expected):
    model = {6: ["model.hidden=384", "model.heads=12", "model.ffn_hidden=1536", "model.seq_len=384", "model.batch=4"],
             3: ["model.hidden=384", "model.heads=12", "model.ffn_hidden=1536", "model.seq_len=384", "model.batch=4"],
             16: ["model.hidden=512", "model.heads=16", "model.ffn_hidden=2048", "model.batch=4"]}[gpus]
    one_error_line(run_cli("model=tiny", *model, "system=dgx_h100_half", f"system.gpus={gpus}", f"scheme={scheme}",
                           "workload=sublayer_l1", f"out_dir={tmp_path}", check=False, timeout=60), expected)
    assert not (tmp_path / "results.csv").exists()


@pytest.mark.parametrize("override,expected", [
    # both engine processes refuse it; whichever answers first is named
    ("gpu.smem_configs_kb=[8,4]", ("gpu.smem_configs_kb: rejected by engine engine",
                                   ": gpu.smem_configs_kb: must be >= 0 and strictly rising")),
    ("gpu.smem_configs_kb=[0,100]", ("gpu.smem_configs_kb: needs a largest configuration that holds gpu.smem_per_sm_kb",)),
    ("gpu.l1_smem_per_sm_kb=200", ("gpu.l1_smem_per_sm_kb: must hold the largest shared-memory configuration",)),
])
def test_shared_memory_configurations_the_engine_cannot_use_are_refused(engines, tmp_path, override, expected):
    proc = run_cli("model=tiny", "phase=inference", "workload=sublayer_l1", "scheme=tp_nvls", "system=dgx_h100_half",
                   override, f"out_dir={tmp_path}", check=False, timeout=120)
    one_error_line(proc, *expected)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("experiment,override,expected", [
    ("validate_overlap", "validate.stats=true", "validate.stats: experiment validate_overlap does not read it"),
    ("validate_overlap", "model=tiny", "model: experiment validate_overlap does not read it"),
    ("validate_overlap", "traffic.requests_per_gpu=3", "experiment validate_overlap does not read traffic"),
    ("validate_collectives", "scheme=cais", "scheme: experiment validate_collectives does not read it"),
    # the ISA NVLS kernel needs delivered multicast stores: the key is not the user's to turn off
    ("validate_collectives validate.kernels=isa", "net.nvls.member_acks=false",
     "net.nvls.member_acks: experiment validate_collectives does not read it with validate.kernels=isa"),
    ("validate_kernels", "phase=training", "phase: experiment validate_kernels does not read it"),
    ("validate_concurrent", "validate.kernels=isa", "experiment validate_concurrent does not read it"),
    ("validate_overlap", "validate.gemm=library", "validate.gemm: experiment validate_overlap does not read it"),
])
def test_a_key_an_experiment_never_reads_is_refused(tmp_path, experiment, override, expected):
    """Instead of a run that silently goes without it (a sweep over it would repeat one point)."""
    proc = run_cli(*f"experiment={experiment}".split(), override, f"out_dir={tmp_path}", check=False, timeout=60)
    one_error_line(proc, expected)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("experiment", ["validate_kernels", "validate_concurrent"])
def test_a_validation_refuses_a_negative_clock(tmp_path, experiment):
    one_error_line(run_cli(f"experiment={experiment}", "gpu.clock_mhz=-5", f"out_dir={tmp_path}", check=False,
                           timeout=120), "gpu.clock_mhz: must be 0 (the power model's clock) or a clock > 0 MHz")


@pytest.mark.parametrize("args,expected", [
    (["compare.schemes=[cais]"], "compare.schemes: experiment simulate does not read compare; remove it"),
    (["model=tiny", "system=dgx_h100_half", "workload=sublayer_l1", "scheme=tp_nvls",
      "net.cais_merge.table_entries=10"],
     "net.cais_merge.table_entries: experiment simulate does not read net.cais_merge with net.features='nvls' "
     "(scheme tp_nvls's), which leaves that feature off"),
    (["workload=collective", "collective.algo=ring", "net.nvls.member_acks=true"],
     "experiment simulate does not read net.nvls with net.features='', which leaves that feature off"),
])
def test_one_simulation_refuses_other_experiments_keys_and_features_its_switches_leave_off(tmp_path, args, expected):
    proc = run_cli(*args, f"out_dir={tmp_path}", check=False, timeout=60)
    one_error_line(proc, expected)
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("args,expected", [
    # an LLM layer runs on the Hopper engine: no GPU model's section, no system.gpu_model
    (("workload=sublayer_l1", "scheme=tp_nvls", "traffic.requests_per_gpu=3"),
     "traffic.requests_per_gpu: experiment simulate does not read traffic with workload=sublayer_l1"),
    (("workload=layer", "scheme=tp_nvls", "collective.bytes=4096"), "does not read collective with workload=layer"),
    (("workload=layer", "scheme=tp_nvls", "system.gpu_model=collective"),
     "system.gpu_model: experiment simulate does not read it with workload=layer"),
    # a traffic run: no model, phase or coordination, and only its own GPU model's section
    (("phase=training",), "phase: experiment simulate does not read it with workload=traffic"),
    (("coordination=throttle",), "coordination: experiment simulate does not read it with workload=traffic"),
    (("system.gpu_model=collective", "traffic.request_bytes=64"),
     "does not read traffic with workload=traffic and system.gpu_model=collective"),
    (("synthetic.packet_flits=2",), "does not read synthetic with workload=traffic and system.gpu_model=traffic"),
    # the Hopper engine's parameters: the traffic and NCCL-like GPU models never see them
    (("gpu.clock_mhz=0",), "gpu.clock_mhz: experiment simulate does not read gpu with workload=traffic"),
    (("system.gpu_model=collective", "gpu.warp_load_bytes_per_cycle=0"),
     "does not read gpu with workload=traffic and system.gpu_model=collective"),
])
def test_a_key_a_simulation_does_not_read_is_refused(tmp_path, args, expected):
    """What simulate reads depends on the run: its workload and GPU model decide."""
    proc = run_cli("model=tiny" if "workload=" in args[0] else "seed=1", *args, f"out_dir={tmp_path}",
                   check=False, timeout=60)
    one_error_line(proc, expected)
    assert not list(tmp_path.iterdir())


def test_validate_collectives_honours_gpus_per_process(monkeypatch):
    seen = {}

    def fake_simulate(topo, params, **opts):
        seen.update(opts)
        raise ConfigError("stop", "here")

    monkeypatch.setattr(vc, "simulate", fake_simulate)
    row = pd.Series({"name": "r", "op": "all_reduce", "bytes": 1 << 20, "gpus": 4, "algo": "ring"})
    with pytest.raises(ConfigError):
        vc.simulate_row(compose("experiment=validate_collectives", "cosim.gpus_per_process=1"), row)
    assert seen["gpus_per_process"] == 1



@pytest.mark.parametrize("args,expected", [
    (["--cfg", "job", "experiment=foo"], "experiment/foo: no such config; available: ci_fast"),
    (["--cfg=job", "model=foo"], "model/foo: no such config"),
    (["--resolve", "--cfg", "job", "gpu.sms=3"], "gpu.sms: unknown config key"),
    (["--info", "defaults", "seed=abc"], "seed: Value 'abc'"),
    (["-m", "--cfg", "job", "seed=1,2", "model=x"], "model/x: no such config"),
])
def test_showing_the_config_of_a_bad_command_line_is_one_line(args, expected):
    one_error_line(run_cli(*args, timeout=60, check=False), expected)


def test_showing_a_package_of_the_config_still_works():
    proc = run_cli("--cfg", "job", "-p", "cosim", "cosim.processes=3", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "# @package cosim" in proc.stdout and "processes: 3" in proc.stdout


@pytest.mark.parametrize("args,expected", [
    # the GEMM beside CoCoNet's resident channels had no SM: a deadlock, or a ZeroDivisionError at 16
    (["scheme=coconet", "gpu.num_sms=16", "model.num_sms=16"],
     "scheme.channels: 16 communication CTAs of scheme 'coconet' hold their SMs for the whole GEMM, which needs at "
     "least one of the 16 (gpu.num_sms); allowed: 1 to 15"),
    (["scheme=coconet_nvls", "gpu.num_sms=8", "model.num_sms=8"], "scheme.channels: 16 communication CTAs"),
    # multimem without NVLS switches ran, each multicast request served by one GPU as a unicast
    (["scheme=tp_nvls", "net.features="], "net.features: kernel 'reduce_out_proj' uses multicast (multimem.*, a "
                                          "multicast DMA), which needs the switch feature nvls (got ''"),
    # CAIS's coordination without the switches' group table: "sw3: no route to node 11 for PKT_SYNC_REQ"
    (["scheme=cais", "net.features=cais_merge"], "net.features: kernel 'out_proj' uses CAIS group sync (pre-launch "
                                                 "or pre-access), which needs the switch feature group_sync"),
    (["scheme=cais", "net.vc_depth_flits=8"],
     "net.vc_depth_flits: is 8 flits but a line of gpu.max_packet_bytes=128 is 9 flits and must fit one VC"),
])
def test_a_layer_its_gpus_or_links_cannot_carry_is_refused(engines, tmp_path, args, expected):
    proc = run_cli("model=tiny", "system=dgx_h100_half", "workload=sublayer_l1", *args, f"out_dir={tmp_path}",
                   check=False, timeout=120)
    one_error_line(proc, expected)
    assert not (tmp_path / "results.csv").exists()


@pytest.mark.parametrize("args,expected", [
    (["seed=1)"], "cannot parse the override 'seed=1)' (extraneous input ')' expecting <EOF>); quote a value"),
    (["out_dir=/tmp/ünï"], "cannot parse the override 'out_dir=/tmp/ünï' (token recognition error at: 'ü')"),
    (["-m", "seed=1,2)"], "cannot parse the override 'seed=1,2)'"),
    # Hydra's three hints (list, quoted string, sweep) were cut to their first line
    (["net.features=nvls,cais_merge"], "net.features: 'nvls,cais_merge' has a comma: for a list write "
                                       "net.features=[nvls,cais_merge], for one string quote it "
                                       "(net.features='nvls,cais_merge'), to sweep add -m"),
])
def test_an_override_hydra_cannot_parse_is_named_with_the_way_out(args, expected):
    one_error_line(run_cli(*args, check=False, timeout=60), expected)


def test_an_error_the_engine_reports_is_one_line_without_its_stderr_repeating_it(engines, tmp_path):
    proc = run_cli("model=tiny", "system=dgx_h100_half", "workload=sublayer_l1", "scheme=cais",
                   "net.group_sync.table_entries=1", f"out_dir={tmp_path}", check=False, timeout=120)
    one_error_line(proc, "group-sync table full (1 groups pending; raise net.group_sync.table_entries)")
