"""The run cache's key: what a run computes, not where it writes."""
from __future__ import annotations

from harness import REPO_ROOT
from harness.run_cache import NOT_RUN_CODE, OUTPUT_GLOBS, fingerprint_files, run_key
from conftest import compose


def test_the_key_ignores_output_paths_and_progress_but_not_inputs():
    base = run_key(compose("seed=1"))
    assert run_key(compose("seed=1", "out_dir=/tmp/elsewhere", "cosim.progress=false", "cache.dir=/tmp/c")) == base
    assert run_key(compose("seed=2")) != base
    assert run_key(compose("seed=1", "system=xbar8")) != base


def test_the_key_ignores_how_many_points_run_at_once_and_how_engines_are_spread():
    base = run_key(compose("seed=1"))
    assert run_key(compose("seed=1", "figure.jobs=4")) == base
    assert run_key(compose("seed=1", "cosim.colocate=true", "cosim.gpus_per_process=1", "cosim.transport=ipc")) == base


def test_a_point_two_experiments_share_is_one_key():
    # Table II's layers are Fig 2's (8 GPUs, full scale) and Fig 11's (LLaMA-7B, training) points
    table2 = run_key(compose("experiment=table2", "setup=half", "scheme=tp_nvls", "task=simulate"))
    assert table2 == run_key(compose("experiment=fig11", "model=llama_7b", "phase=training", "scheme=tp_nvls",
                                     "task=simulate"))
    full = run_key(compose("experiment=table2", "setup=full", "scheme=tp_nvls", "task=simulate"))
    assert full == run_key(compose("experiment=fig2", "system.gpus=8", "task=simulate"))
    assert full != table2


def test_the_code_left_out_of_the_key_exists():
    # the list must follow renames: a stale name would leave the renamed module in the key
    for rel in NOT_RUN_CODE:
        assert (REPO_ROOT / "harness" / rel).exists(), rel
    for pattern in OUTPUT_GLOBS:
        assert list((REPO_ROOT / "harness").glob(pattern)), pattern


def test_committed_outputs_are_not_in_the_key_and_inputs_are():
    # re-running a validation and committing its rows must keep every cached run
    files = fingerprint_files()
    validation = REPO_ROOT / "harness" / "data" / "validation"
    assert validation / "concurrent_h100.csv" in files
    assert validation / "concurrent_h100_results.csv" not in files
    assert REPO_ROOT / "harness" / "data" / "calibration" / "h100_validation.csv" not in files
    assert not [p for p in files if (REPO_ROOT / "harness" / "data" / "measured" / "raw") in p.parents]
    # and no code a run executes names one of the files left out (run_cache.py names them to leave them out)
    left_out = [p for p in (REPO_ROOT / "harness" / "data").rglob("*") if p.is_file() and p not in files]
    code = "".join(p.read_text() for p in files if p.suffix == ".py" and p.name != "run_cache.py")
    named = [p.name for p in left_out if p.name in code]
    assert not named, named


def test_the_key_hashes_the_protocol_sources_not_the_modules_generated_from_them():
    # harness/_proto/ exists only once something imported harness.protocol: a key computed
    # before that (a script) must equal cais-sim's, and an edited .proto must still miss
    import harness.protocol  # noqa: F401  (generates harness/_proto/)

    files = fingerprint_files()
    assert REPO_ROOT / "proto" / "cosim.proto" in files
    assert not [p for p in files if (REPO_ROOT / "harness" / "_proto") in p.parents]


def test_a_cache_that_cannot_be_written_is_reported_not_fatal(tmp_path, capsys):
    # A file where the cache folder should be: mkdir fails for any user, root included.
    from harness import sweep
    from harness.run_cache import store

    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    out = tmp_path / "run"
    out.mkdir()
    (out / "results.csv").write_text("a\n1\n")
    why = store(compose(f"cache.dir={blocker / 'cache'}"), "ab" * 16, out)
    assert why.startswith(f"cannot write {blocker / 'cache'}: ")
    assert store(compose(f"cache.dir={tmp_path / 'cache'}"), "ab" * 16, out) == ""
    assert (tmp_path / "cache" / "ab" / ("ab" * 16) / "results.csv").is_file()
    assert store(compose("cache.enabled=false", f"cache.dir={blocker / 'cache'}"), "ab" * 16, out) == ""

    points = [("seed=1", {"status": "ok", "cache_error": why}), ("seed=2", {"status": "ok"})]
    assert sweep.summarize(points) == sweep.EXIT_OK  # the runs are fine
    err = capsys.readouterr().err
    assert "sweep: 2 of 2 points succeeded (0 from the cache)" in err
    assert f"cache: 1 of 2 points were not stored ({why}); a repeated sweep recomputes them" in err


def test_a_single_run_says_when_the_cache_did_not_keep_it(engines, tmp_path):
    from conftest import run_cli

    blocker = tmp_path / "not_a_dir"
    blocker.write_text("")
    proc = run_cli("seed=3", f"out_dir={tmp_path / 'run'}", f"cache.dir={blocker / 'cache'}", timeout=120)
    assert (tmp_path / "run" / "results.csv").is_file()
    lines = [ln for ln in proc.stderr.splitlines() if ln.startswith("cache:")]
    assert lines == [f"cache: this run was not stored (cannot write {blocker / 'cache'}: Not a directory); "
                     "cache.dir= names another folder"]
