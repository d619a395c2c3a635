"""The short fuzz run of the harness's parsers (docs/FUZZING.md) and the regression tests of what
fuzzing found. The engines' decoders are fuzzed by cais_fuzz_tests (test_native_units)."""
from __future__ import annotations

import pytest

from harness import booksim_config, fuzz
from harness.config.precheck import precheck
from harness.errors import ConfigError
from harness.fuzz.targets import all_targets
from tests.conftest import run_cli

# Inputs per target: the cheap targets get more (the whole file stays well under 30 s on 2 cores).
SHORT_RUNS = {"booksim": 600, "validate_csv": 300, "overrides": 150, "precheck": 30}


@pytest.mark.parametrize("name", list(SHORT_RUNS))
def test_short_fuzz_run_finds_nothing(name):
    report = fuzz.run(all_targets()[name], SHORT_RUNS[name], seed=1, limit_s=10.0)
    assert not report.findings, report.line() + "\n" + "\n".join(report.findings)
    assert report.inputs >= SHORT_RUNS[name]
    assert report.rejected > 0  # the mutations reach the checks (a target that refuses nothing tests little)


def test_the_fuzzer_reports_a_crash_a_hang_and_an_unclear_refusal():
    def crashes(value):
        raise KeyError(value)

    def hangs(value):
        while True:
            pass

    def two_lines(value):
        raise ConfigError("k", "first\nsecond")

    for run, kind in ((crashes, "KeyError"), (hangs, "hang"), (two_lines, "unclear refusal")):
        report = fuzz.run(fuzz.Target("t", ["x"], run, fuzz.mutate_text), 3, limit_s=0.2, max_findings=1,
                          seed_limit_s=0.2)  # the hang is the seed's own: no room for imports needed
        assert report.findings and report.findings[0].startswith(kind), report.findings


def test_booksim_file_that_is_not_utf8_is_one_line_naming_the_file_and_line(tmp_path):
    path = tmp_path / "net.cfg"
    path.write_bytes(b"k = 8;\ntraffic = unif\xe9rm;\n")
    with pytest.raises(ConfigError, match=r"net\.booksim_config: .*net\.cfg:2: byte 0xe9 is not UTF-8"):
        booksim_config.load(path)


@pytest.mark.parametrize("override", ["seed=${nope}", "cosim.progress=e${x}"])
def test_an_interpolation_to_nowhere_is_refused_before_the_run(override):
    key = override.split("=")[0]
    with pytest.raises(ConfigError, match=rf"{key}: Interpolation key '\w+' not found"):
        precheck([override])


def test_an_interpolation_to_nowhere_is_one_cli_line():
    proc = run_cli("seed=${nope}", check=False)
    assert proc.returncode == 2, proc.stderr
    assert proc.stderr.strip() == "cais-sim: error: seed: Interpolation key 'nope' not found"


def test_validate_size_too_large_for_a_float_names_the_row(tmp_path):
    from harness.experiments import validate_collectives

    path = tmp_path / "rows.csv"
    path.write_text("name,op,bytes,gpus,algo\nbig,all_reduce,1e309,2,ring\n")
    with pytest.raises(ConfigError, match=r"rows\.csv line 2 \(name big\): bytes 'inf' is not allowed"):
        validate_collectives.load_input(str(path))


def test_a_hang_inside_code_that_catches_every_exception_is_still_a_hang():
    """A false finding of the long overrides run: a composition past the time limit under load was
    caught by the precheck's `except Exception` and reported as an empty refusal."""
    import time

    from harness import fuzz

    def slow(value):
        try:
            time.sleep(5 if value == "mutated" else 0)
        except Exception as exc:  # noqa: BLE001 - as harness.config.precheck
            raise ConfigError("", str(exc)) from None

    target = fuzz.Target("slow", ["seed"], slow, lambda s, o, r: "mutated")
    report = fuzz.run(target, 1, limit_s=0.05)
    assert [f[:4] for f in report.findings] == ["hang"], report.findings


def test_validate_csv_size_past_int64_names_the_row(tmp_path):
    """Found by the long validate_csv run: 85818446744073709551616 bytes was an OverflowError."""
    from harness.experiments import validate_collectives

    path = tmp_path / "rows.csv"
    path.write_text("name,op,bytes,gpus,algo\nbig,all_reduce,85818446744073709551616,2,ring\n")
    with pytest.raises(ConfigError, match=r"rows\.csv line 2 \(name big\): bytes '85818446744073709551616' is not "
                                          r"allowed; allowed: a whole number from 1 to 9223372036854775807"):
        validate_collectives.load_input(str(path))


def test_concurrent_row_with_an_extra_field_names_the_row(tmp_path):
    from harness.experiments import validate_concurrent

    header = ("name,M,N,K,stream_kind,ctas,bytes,order,start_gap_us,gemm_us,stream_us,makespan_us,gemm_alone_us,"
              "stream_alone_us")
    path = tmp_path / "rows.csv"
    path.write_text(header + "\na,x,0,1,1,copy,8,64,stream_first,0,1,1,1,1,1\n")  # one field too many
    with pytest.raises(ConfigError, match=r"rows\.csv line 2 has 15 fields, the header 14"):
        validate_concurrent.load_input(str(path))


# ------------------------------------------------------------ the overrides target's fast path

def _outcomes(run, inputs):
    out = []
    for argv in inputs:
        try:
            run(argv)
            out.append("accepted")
        except Exception as exc:  # noqa: BLE001 - compared, not judged
            out.append(f"{type(exc).__name__}: {exc}")
    return out


def _mutated_command_lines(n, seed):
    import random

    from harness.fuzz import overrides_target as ot

    rng = random.Random(seed)
    return [ot.mutate_argv(rng.choice(ot.COMMAND_LINES), rng.choice(ot.COMMAND_LINES), rng) for _ in range(n)]


@pytest.mark.parametrize("sections_named", ["as_written", "none"])
def test_overrides_fast_path_answers_as_a_full_copy_and_leaves_the_cached_config_alone(monkeypatch, sections_named):
    """The copy-on-write path (only the named sections copied, only they resolved) must give every
    input the answer a full copy gives. `none`: no section is copied, so every value override
    reaches a read-only cached section and must be redone on a full copy, not half-applied."""
    from omegaconf import OmegaConf

    from harness.fuzz import overrides_target as ot

    monkeypatch.setattr(ot, "MISSING_OPTION_SAMPLE", 1)  # compose every point, as the full path does
    if sections_named == "none":
        monkeypatch.setattr(ot, "_sections_named", lambda values: set())
    inputs = _mutated_command_lines(200, seed=11)
    cached = {groups: OmegaConf.to_yaml(ot._composed(groups).cfg) for groups in [(), ("system=xbar8",)]}
    full_copies = ot._stats["full_copies"]
    fast = _outcomes(ot.run_overrides, inputs)
    full = _outcomes(ot.run_overrides_full, inputs)
    assert [(argv, a, b) for argv, a, b in zip(inputs, fast, full) if a != b] == []
    assert 40 < fast.count("accepted") < 160  # both kinds of answer are compared
    for groups, text in cached.items():
        assert OmegaConf.to_yaml(ot._composed(groups).cfg) == text
    assert (ot._stats["full_copies"] > full_copies) == (sections_named == "none")


def test_short_overrides_run_catches_a_crash_in_the_checks_it_reaches(monkeypatch):
    """A planted bug behind the value overrides (the experiment's check crashing for a GPU count
    other than 8) is found: the values reach the checks."""
    from harness.experiments import simulate

    check = simulate.check

    def planted(cfg):
        if cfg.system.gpus != 8:
            raise IndexError("planted")
        check(cfg)

    monkeypatch.setattr(simulate, "check", planted)
    report = fuzz.run(all_targets()["overrides"], SHORT_RUNS["overrides"], seed=1, limit_s=10.0)
    assert any(f.startswith("IndexError: planted") for f in report.findings), report.line()


def test_short_overrides_run_catches_a_refusal_of_two_lines(monkeypatch):
    """A planted bug in how Hydra's refusals become one line (a validation error given two lines)."""
    from harness.config import precheck

    one_line = precheck.one_line
    monkeypatch.setattr(precheck, "one_line",
                        lambda exc: one_line(exc) + ("\nmore" if "Value '" in str(exc.__cause__ or exc) else ""))
    report = fuzz.run(all_targets()["overrides"], SHORT_RUNS["overrides"], seed=1, limit_s=10.0)
    assert any(f.startswith("unclear refusal") for f in report.findings), report.line()


def test_a_missing_option_is_sampled_only_where_hydra_must_refuse(monkeypatch):
    """Found comparing the target with main's: after Hydra listed the scheme options, a command
    line naming `scheme` twice, first with a missing option, was given the earlier refusal although
    Hydra takes the last option and accepts it."""
    from harness.fuzz import overrides_target as ot

    monkeypatch.setattr(ot, "MISSING_OPTION_SAMPLE", 10**9)  # never composed again once listed
    with pytest.raises(ConfigError, match="no such config"):
        ot.run_overrides(["scheme=coconet_nvNs"])
    sampled = ot._stats["sampled_out"]
    ot.run_overrides(["scheme=coconet_nvNs", "scheme=coconet_nvls"])  # accepted
    with pytest.raises(ConfigError, match="no such config"):
        ot.run_overrides(["scheme=coconet_nvXs"])
    assert ot._stats["sampled_out"] == sampled + 1


@pytest.mark.parametrize("overrides, message", [
    (["system=xbar8", "system.gpus=1844674407"], r"system\.gpus: 1844674407 GPUs: the engines address at most 65536"),
    (["system=dgx_h100", "system.gpus=60000", "system.switches=30000", "system.lanes_per_switch=[1]"],
     r"system\.switches: 90000 nodes"),
    (["system=dgx_h100", "system.gpus=30000", "system.switches=30"], r"system\.switches: 900000 GPU-switch channels"),
    (["system=fat_tree_256", "system.spines=70000"], r"system\.spines: 70288 nodes"),
])
def test_a_system_too_large_to_build_is_refused_at_once(overrides, message):
    """Found by the long overrides run (a hang): system.gpus=1844674407 built GPU nodes for hours."""
    import time

    from harness import topology

    cfg = precheck_compose(overrides)
    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=message):
        topology.build(cfg.system)
    assert time.perf_counter() - t0 < 1.0


def test_a_negative_spine_count_is_refused_by_name():
    """Before, system.spines=-3 built a fat tree whose leaves had no spines to reach each other."""
    from harness import topology

    cfg = precheck_compose(["system=fat_tree_256", "system.spines=-3"])
    with pytest.raises(ConfigError, match=r"system\.spines: must be 0 .* or a positive integer, got -3"):
        topology.build(cfg.system)


def test_a_sweep_axis_too_long_to_list_is_refused_at_once():
    """Found by the long overrides run (a hang): -m seed=range(1,1e3094) listed values forever."""
    import time

    from harness.config.precheck import sweep_points

    t0 = time.perf_counter()
    with pytest.raises(ConfigError, match=r"the sweep range\(1,1e3094\) has more than 100000 values"):
        sweep_points(["seed=range(1,1e3094)", "traffic.requests_per_gpu=choice(1,2)"])
    assert time.perf_counter() - t0 < 5.0
    assert len(sweep_points(["seed=range(1,11)", "traffic.requests_per_gpu=choice(1,2)"])) == 20


def precheck_compose(overrides):
    from harness.config.precheck import compose_one

    return compose_one(overrides)


@pytest.mark.parametrize("value", ["11e309", "1e-9", "2e9", "nan"])
def test_a_link_latency_the_engines_cannot_take_names_the_key(value):
    """Found by the long overrides run: system.link_latency_ns=11e309 (inf) was an OverflowError."""
    from harness import topology

    cfg = precheck_compose(["system=xbar8", f"system.link_latency_ns={value}"])
    with pytest.raises(ConfigError, match=r"system\.link_latency_ns: must be 0\.001 to 1e9 ns"):
        topology.build(cfg.system)
