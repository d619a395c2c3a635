"""What a new user can ask the CLI: describe, --help, --cfg job, the progress line."""
from __future__ import annotations

import io
import re

import pytest

from harness.config import describe
from harness.config.schema import build_root
from harness.cosim import progress
from tests.conftest import run_cli

ANSI = re.compile(r"\x1b\[[0-9;?]*[a-zA-Z]")


def test_describe_a_group_shows_type_default_unit_and_the_schema_docstring():
    out = run_cli("describe", "system", timeout=60).stdout
    assert "system.link_latency_ns: float = 250.0 [ns]" in out
    assert "GPU-switch (and switch-switch) link latency." in out
    assert "system.lane_bw_gbps: float = 25.0 [GB/s]" in out
    assert "net." not in out


def test_describe_a_key_with_overrides_shows_the_value_a_run_gets():
    out = run_cli("describe", "traffic.request_bytes", "traffic.request_bytes=64", timeout=60).stdout
    assert out.splitlines()[0] == "traffic.request_bytes: int = 64 [B]"
    assert "one NVLink packet" in out


def test_every_parameter_of_the_engines_is_documented():
    """The docstrings under the fields of harness/params/*.py are what describe prints."""
    undocumented = [p.key for p in describe.params(build_root(), None)
                    if not p.doc and p.key.split(".")[0] != "model"]
    assert undocumented == []


def test_describe_overview_and_unknown_names():
    out = run_cli("describe", timeout=60).stdout
    assert re.search(r"^  cosim +\d+ keys  Co-simulation", out, re.M) and "  system=dgx_h100|" in out
    proc = run_cli("describe", "nosuch", check=False, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == ("cais-sim: error: describe: no parameter group or key 'nosuch'; groups: "
                                   + ", ".join(describe.groups(build_root())))


def test_help_is_short_and_points_to_describe():
    out = run_cli("--help", timeout=60).stdout
    assert "cais-sim describe" in out and len(out.splitlines()) < 60
    assert "experiment=" in out


def test_cfg_job_prints_the_resolved_config():
    out = run_cli("--cfg", "job", "seed=5", timeout=60).stdout
    assert "seed: 5" in out and "cosim:" in out


def test_progress_modes():
    tty, pipe = io.StringIO(), io.StringIO()
    tty.isatty = lambda: True
    assert progress.wanted("auto", tty) and not progress.wanted("auto", pipe)
    assert progress.wanted("true", pipe) and not progress.wanted("false", tty)
    assert progress.parse_mode(True) == "true" and progress.parse_mode("False") == "false"
    with pytest.raises(Exception, match="cosim.progress: 'sometimes' is not one of: auto, true, false"):
        progress.parse_mode("sometimes")


def test_progress_line_on_a_long_run(engines, tmp_path):
    args = ["traffic.requests_per_gpu=250000", f"out_dir={tmp_path}"]
    shown = run_cli(*args, "cosim.progress=true", timeout=120).stderr
    lines = ANSI.sub("", shown).replace("\r", "\n")
    assert re.search(r"sim [\d,.]+ us \| [\d.]+ M events/s", lines), lines[-500:]
    quiet = run_cli(*args, timeout=120).stderr  # auto, and stderr is a pipe: nothing
    assert quiet == ""


def test_describe_takes_several_keys_and_groups():
    out = run_cli("describe", "net.flit_bytes", "gpu.max_packet_bytes", "net.header_flits=2", timeout=60).stdout
    assert "net.flit_bytes: int = 16" in out and "gpu.max_packet_bytes: int = 128" in out
    assert "net.header_flits" not in out  # an override, not a key to describe
