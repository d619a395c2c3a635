"""Network engine, synthetic mode: the BookSim-style config reader, NetParams, and
experiment=net_synthetic end to end (cais-net-synthetic)."""
from __future__ import annotations

import dataclasses
import re
import subprocess

import pandas as pd
import pytest

from harness import REPO_ROOT, booksim_config
from harness.errors import ConfigError
from harness.params.net import NetParams, SyntheticParams
from tests.conftest import read_results

FLY8 = REPO_ROOT / "conf" / "booksim" / "fly8_uniform.cfg"
SMALL = """// small and fast
topology = fly; k = 4; n = 1;
routing_function = dest_tag;
num_vcs = 4; vc_buf_size = 64; packet_size = 9;
traffic = uniform;
injection_rate = 0.05; injection_rate_uses_flits = 1;
sample_period = 1000; warmup_periods = 1; max_samples = 20;
"""


def test_repo_config_loads():
    c = booksim_config.load(FLY8)
    assert c.int("k") == 8 and c.int("packet_size") == 9 and c.int("num_vcs") == 8
    assert c.offered_flits(0.3) == pytest.approx(0.3)


@pytest.mark.parametrize("text,key", [
    ("k = 4;\nbogus = 1;\n", "bogus"),
    ("topology = mesh;", "topology"),
    ("n = 2;", "n"),
    ("traffic = hotspot; vc_buf_size = 16;", "hotspot_nodes"),
    ("vc_allocator = islip;", "vc_allocator"),
    ("packet_size = 20;", "packet_size"),
    ("k = four;", "k"),
    ("hotspot_nodes = {1, x};", "hotspot_nodes"),
    ("speculative = 1;", "speculative"),
])
def test_parser_names_the_bad_key(text, key):
    with pytest.raises(ConfigError) as err:
        booksim_config.parse_text(text).validate()
    assert err.value.key == key


def test_unsupported_booksim_options_are_named_as_such():
    with pytest.raises(ConfigError, match="not modelled by cais-net-synthetic; remove it"):
        booksim_config.parse_text("spec_check_elig = 1;")
    src = (REPO_ROOT / "external" / "net" / "src" / "booksim_config.cc").read_text()
    block = src[src.index("unsupported_booksim_keys()"):]
    block = block[:block.index("return keys;")]
    assert set(re.findall(r'"(\w+)"', block)) == booksim_config.UNSUPPORTED


def test_cpp_and_python_fixed_value_tables_agree():
    src = (REPO_ROOT / "external" / "net" / "src" / "booksim_config.cc").read_text()
    block = src[src.index("booksim_fixed_values() {"):]
    block = block[:block.index("return keys;")]
    cpp = {k: tuple(re.findall(r'"([^"]*)"', v)) for k, v in re.findall(r'\{"(\w+)", \{([^}]*)\}\}', block)}
    assert cpp == booksim_config.FIXED


@pytest.mark.parametrize("text", [
    "alloc_iters = 1; wait_for_tail_credit = 0; input_speedup = 1; output_speedup = 1; internal_speedup = 1.0;",
    "latency_thres = 1e9; warmup_thres = 1e9; hold_switch_for_packet = 1; router = iq; perm_seed = 7;",
    "traffic = hotspot({{0,1}}); vc_buf_size = 16;",
    "traffic = hotspot({{2},{1}}); vc_buf_size = 16;",
    "internal_speedup = 2.0; output_buffer_size = 2;",
    "internal_speedup = 4; output_buffer_size = 4; routing_delay = 0;",
    "internal_speedup = 1; output_buffer_size = 1;",
    # BookSim's runfiles set the read/write scheme's VC ranges even with use_read_write = 0
    "read_request_begin_vc = 0; read_request_end_vc = 5; write_reply_begin_vc = 2; read_reply_size = 5; "
    "write_request_subnet = 0; write_fraction = 0.25;",
    "watch_out = -;",  # BookSim's stdout; nothing is watched (watch_file etc. are not modelled)
])
def test_booksim_keys_accepted_at_modelled_values(text):
    booksim_config.parse_text(text).validate()


@pytest.mark.parametrize("text, key", [
    ("alloc_iters = 2;", "alloc_iters"),
    ("wait_for_tail_credit = 1;", "wait_for_tail_credit"),
    ("input_speedup = 2;", "input_speedup"),
    ("output_speedup = 2;", "output_speedup"),
    ("internal_speedup = 1.5;", "internal_speedup"),
    ("internal_speedup = 5;", "internal_speedup"),
    ("internal_speedup = 0;", "internal_speedup"),
    ("internal_speedup = 2.0;", "output_buffer_size"),  # BookSim's default -1 (unbounded) is not modelled at 2
    ("internal_speedup = 2.0; output_buffer_size = 3;", "output_buffer_size"),
    ("output_buffer_size = 2;", "output_buffer_size"),
    ("internal_speedup = 2.0; output_buffer_size = 2; routing_delay = 2;", "routing_delay"),
    ("internal_speedup = 2.0; output_buffer_size = 2; hold_switch_for_packet = 1;", "hold_switch_for_packet"),
    ("hold_switch_for_packet = 2;", "hold_switch_for_packet"),
    ("latency_thres = high;", "latency_thres"),
    ("traffic = hotspot({{0,1},{1,2}}); vc_buf_size = 16;", "traffic"),
    ("traffic = tornado;", "traffic"),
    ("read_request_end_vc = many;", "read_request_end_vc"),
    ("write_fraction = half;", "write_fraction"),
    ("use_read_write = 1;", "use_read_write"),
    ("watch_out = trace.txt;", "watch_out"),
])
def test_booksim_keys_rejected_by_name(text, key):
    with pytest.raises(ConfigError) as err:
        booksim_config.parse_text(text).validate()
    assert err.value.key == key


def test_internal_speedup_error_names_key_file_and_values():
    with pytest.raises(ConfigError) as err:
        booksim_config.parse_text("k = 4;\ninternal_speedup = 1.5;\n", "fly.cfg").validate()
    assert err.value.key == "internal_speedup"
    assert str(err.value) == "internal_speedup: fly.cfg:2: '1.5' is not modelled (supported: 1, 2, 3, 4)"
    accepted = booksim_config.parse_text("internal_speedup = 2.0; output_buffer_size = 2;").validate()
    assert accepted.values["internal_speedup"] == "2.0"


def test_cpp_reader_refuses_internal_speedup_by_name(engines, tmp_path):
    cfg = tmp_path / "s.cfg"
    cfg.write_text(SMALL + "internal_speedup = 1.5;\n")
    proc = subprocess.run([str(engines / "cais-net-synthetic"), str(cfg)], capture_output=True, text=True)
    assert proc.returncode == 2
    assert f"internal_speedup: {cfg}:8: '1.5' is not modelled (supported: 1, 2, 3, 4)" in proc.stderr


def test_cpp_reader_takes_the_read_write_keys_booksim_ignores_and_refuses_a_bad_one(engines, tmp_path):
    cfg = tmp_path / "rw.cfg"
    cfg.write_text(SMALL + "read_request_begin_vc = 0;\nwrite_reply_end_vc = 7;\nwrite_fraction = 0.5;\n"
                           "watch_out = -;\n")
    proc = subprocess.run([str(engines / "cais-net-synthetic"), str(cfg)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    cfg.write_text(SMALL + "read_reply_size = x;\n")
    proc = subprocess.run([str(engines / "cais-net-synthetic"), str(cfg)], capture_output=True, text=True)
    assert proc.returncode == 2 and "read_reply_size: expected an integer, got 'x'" in proc.stderr


def test_internal_speedup_2_runs(engines, cli, tmp_path):
    """internal_speedup = 2.0 reaches the router (net.internal_speedup = 2): its 1-cycle stages take
    half a cycle (1-flit zero-load latency 2 cycles lower) and past speedup 1's saturation the
    router still accepts what is offered."""
    rows = {}
    for speedup in (1, 2):
        cfg = tmp_path / f"s{speedup}.cfg"
        cfg.write_text(SMALL.replace("packet_size = 9", "packet_size = 1") +
                       f"internal_speedup = {speedup}.0; output_buffer_size = {speedup};\n"
                       "latency_thres = 1e9; warmup_thres = 1e9;\n")
        out = tmp_path / f"o{speedup}"
        cli("experiment=net_synthetic", f"net.booksim_config={cfg}", "net.injection_rates=[0.05,0.9]",
            f"out_dir={out}")
        rows[speedup] = read_results(out)
    zero = {s: rows[s]["avg_packet_latency_cycles"][0] for s in rows}
    assert zero[1] - zero[2] == pytest.approx(2.0, abs=0.2)
    assert rows[2]["accepted_flits_per_node_cycle"][1] == pytest.approx(0.9, rel=0.03)
    assert rows[1]["accepted_flits_per_node_cycle"][1] < 0.85


def test_hotspot_syntax_gives_the_nodes():
    cfg = booksim_config.parse_text("traffic = hotspot({{0, 3}}); vc_buf_size = 16;").validate()
    assert cfg.traffic() == ("hotspot", [0, 3])


def test_parser_syntax_errors():
    with pytest.raises(ConfigError, match="missing ';'"):
        booksim_config.parse_text("k = 4")
    with pytest.raises(ConfigError, match="expected 'key = value;'"):
        booksim_config.parse_text("k 4;")
    c = booksim_config.parse_text("// only a comment\n k = 4 ; // trailing\n\n n=1;")
    assert c.values["k"] == "4" and c.given == {"k", "n"}


def test_cpp_and_python_readers_accept_the_same_keys(engines):
    out = subprocess.run([str(engines / "cais-net-synthetic"), "--keys"], capture_output=True, text=True,
                         check=True).stdout
    cpp = dict(re.findall(r"^(\w+) = (.*);$", out, re.M))
    assert cpp == booksim_config.SUPPORTED


def test_net_params_declare_every_key_the_router_reads():
    declared = {f.name for f in dataclasses.fields(NetParams)}
    synthetic = {f.name for f in dataclasses.fields(SyntheticParams)}
    src = REPO_ROOT / "external" / "net" / "src"
    read = set()
    for name in ("router_params.cc", "synthetic_terminal.cc", "nvswitch.cc"):
        read |= set(re.findall(r'get_\w+\("net\.(\w+)"', (src / name).read_text()))
        for key in re.findall(r'get_\w+\("synthetic\.(\w+)"', (src / name).read_text()):
            assert key in synthetic, f"synthetic.{key} is read by the engine but not declared"
    assert read, "no net.* keys found: did the sources move?"
    assert read <= declared, f"read by the engine but not declared in NetParams: {sorted(read - declared)}"
    for f in dataclasses.fields(NetParams):  # units in names where a quantity has one
        if f.name.endswith(("delay", "latency", "bin")):
            pytest.fail(f"net.{f.name} needs a unit in its name")


def test_experiment_sweeps_rates(engines, cli, tmp_path):
    cfg = tmp_path / "small.cfg"
    cfg.write_text(SMALL)
    out = tmp_path / "out"
    cli("experiment=net_synthetic", f"net.booksim_config={cfg}", "net.injection_rates=[0.05,0.4]", f"out_dir={out}")
    df = read_results(out)
    assert list(df.columns[:3]) == ["offered", "avg_packet_latency_cycles", "accepted_flits_per_node_cycle"]
    assert "wall_s" in pd.read_csv(out / "timing.csv").columns  # wall-clock figures live beside results.csv
    assert list(df["offered"]) == [0.05, 0.4]
    assert df["stable"].all()
    # Zero-load latency: 9 flits + 1 + 4 pipeline + 1 link cycles; accepted == offered below saturation.
    assert df["avg_packet_latency_cycles"][0] == pytest.approx(15.4, abs=1.0)
    assert df["accepted_flits_per_node_cycle"].to_numpy() == pytest.approx([0.05, 0.4], rel=0.2)


def test_experiment_rejects_bad_files(engines, cli, tmp_path):
    cfg = tmp_path / "bad.cfg"
    cfg.write_text(SMALL + "speculative = 1;\n")
    proc = cli("experiment=net_synthetic", f"net.booksim_config={cfg}", f"out_dir={tmp_path / 'o'}", check=False)
    assert proc.returncode != 0
    assert "speculative" in proc.stderr
    assert not (tmp_path / "o" / "results.csv").exists()
    proc = cli("experiment=net_synthetic", f"out_dir={tmp_path / 'o2'}", check=False)
    assert proc.returncode != 0 and "net.booksim_config" in proc.stderr
