"""Every Hydra config composes; bad input fails as one line naming the key and the choices."""
from __future__ import annotations

import pytest

from harness import CONF_DIR
from harness.topology import build
from tests.conftest import compose, run_cli

SYSTEMS = sorted(p.stem for p in (CONF_DIR / "system").glob("*.yaml"))
MODELS = sorted(p.stem for p in (CONF_DIR / "model").glob("*.yaml"))
EXPERIMENTS = sorted(p.stem for p in (CONF_DIR / "experiment").glob("*.yaml"))
CALIBRATIONS = sorted(p.stem for p in (CONF_DIR / "calibration").glob("*.yaml"))


@pytest.mark.parametrize("system", SYSTEMS)
def test_every_system_composes_and_builds(system):
    cfg = compose(f"system={system}")
    topo = build(cfg.system)
    gpus = [n for n in topo.nodes if n.kind == 1]
    assert len(gpus) == cfg.system.gpus
    # every channel is a pair of opposite links
    pairs = {(l.src_node, l.src_port, l.dst_node, l.dst_port) for l in topo.links}
    assert all((d, dp, s, sp) in pairs for (s, sp, d, dp) in pairs)


@pytest.mark.parametrize("model", MODELS)
def test_every_model_composes(model):
    cfg = compose(f"model={model}")
    assert cfg.model.name == model and cfg.model.hidden > 0


@pytest.mark.parametrize("experiment", EXPERIMENTS)
def test_every_experiment_composes(experiment):
    cfg = compose(f"experiment={experiment}")
    from harness import experiments

    assert cfg.task in experiments.available()


@pytest.mark.parametrize("calibration", CALIBRATIONS)
def test_every_calibration_composes_and_changes_the_collective_model(calibration):
    plain = compose("experiment=validate_collectives")
    cfg = compose("experiment=validate_collectives", f"calibration={calibration}")
    assert cfg.collective != plain.collective
    assert cfg.system == plain.system  # model parameters (collective.*, net.*), never the system


def test_required_systems_exist():
    assert {"dgx_h100", "dgx_h100_half", "hgx_h200_2gpu", "hgx_h200_4gpu", "xbar8"} <= set(SYSTEMS)
    assert {"mega_gpt_4b", "mega_gpt_8b", "llama_7b", "llama_7b_full"} <= set(MODELS)


@pytest.mark.parametrize("override,expected", [
    ("no_such_key=1", "no_such_key: unknown config key"),
    ("system.gpus=abc", "system.gpus:"),
    ("system.gpus=-2", "system.gpus: must be a positive integer, got -2"),
    ("system.gpus=2.5", "system.gpus:"),
    ("system.lane_bw_gbps=-25", "system.lane_bw_gbps: must be > 0"),
    ("system=nope", "system/nope: no such config; available: dgx_h100"),
    ("cosim.gpus_per_process=0", "cosim.gpus_per_process: must be a positive integer"),
    ("cosim.processes=0", "cosim.processes: must be a positive integer"),
    ("cosim.processes=13", "cosim.processes: must be at most the system's 12 nodes, got 13"),
    ("system.topology=ring", "system.topology: 'ring' is not one of: dgx, xbar, fat_tree"),
    ("cosim.transport=udp", "cosim.transport: 'udp' is not one of: auto, shm, ipc, tcp"),
    ("cosim.shm_spin_us=-1", "cosim.shm_spin_us: must be an integer >= 0, got -1"),
])
def test_bad_input_is_one_clear_line(tmp_path, override, expected):
    proc = run_cli(override, f"out_dir={tmp_path}", check=False, timeout=60)
    assert proc.returncode != 0
    err = [l for l in proc.stderr.splitlines() if l.strip()]
    assert len(err) == 1, proc.stderr
    assert expected in err[0], err[0]
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "results.csv").exists()


def test_missing_engine_binary_names_the_file(tmp_path):
    proc = run_cli(f"out_dir={tmp_path}", check=False, timeout=60, env={"CAIS_ENGINE_DIR": str(tmp_path / "nowhere")})
    assert proc.returncode != 0
    line = proc.stderr.strip().splitlines()
    assert len(line) == 1 and "cais-engine" in line[0] and "nowhere" in line[0] and "build_engines.sh" in line[0]
    assert not (tmp_path / "results.csv").exists()
