"""cais-sim: one run (or a Hydra multirun sweep) of an experiment.

    cais-sim                                  # default: the configured system and workload
    cais-sim system=xbar8 seed=3 out_dir=/tmp/r
    cais-sim experiment=validate_kernels validate.input=cases.csv out_dir=DIR
    cais-sim -m seed=1,2,3                    # a sweep: each point in its own folder
    cais-sim describe [GROUP|KEY]             # every parameter: type, default, unit, documentation

Every run writes <out_dir>/results.csv (atomically, only on success), timing.csv beside it when
the experiment measured wall-clock time, and the resolved config (config.yaml). Without out_dir
a run gets outputs/DATE/TIME-PID-RANDOM, which no other run shares. Errors are one line naming
the key or file at fault; a failed point of a sweep is reported and the sweep goes on; Ctrl-C
stops the run and its engines.
"""
from __future__ import annotations

import os
import signal
import sys
import traceback
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig, OmegaConf

from harness import CONF_DIR
from harness.config.precheck import check_out_dir, precheck
from harness.config.run_dir import discard_run_dir
from harness.config.schema import register
from harness.cosim import cancel, progress
from harness.errors import CaisError
from harness.results import split_timing, write_csv_atomic, write_text_atomic

register()

EXIT_ERROR = 2
EXIT_INTERNAL = 3
EXIT_SWEEP_FAILED = 1
EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by SIGINT

# Points of a multirun sweep, filled by _app as Hydra runs them one after another.
_sweep: dict[str, list] = {"done": [], "failed": []}


def _fail(message: str) -> None:
    print(f"cais-sim: error: {message}", file=sys.stderr)


def run_task(cfg: DictConfig) -> Path:
    """Run cfg's experiment in Hydra's run folder; return the path of results.csv."""
    from harness import experiments

    out_dir = Path(HydraConfig.get().runtime.output_dir)
    check_out_dir(out_dir)
    results, timing_csv = out_dir / "results.csv", out_dir / "timing.csv"
    outputs = [out_dir / n for n in ("results.csv", "timing.csv", "config.yaml", "stats.csv", "series.csv",
                                     "kernels.csv")]
    for stale in outputs:  # a failed rerun must not leave old files looking like its result
        try:
            stale.unlink(missing_ok=True)
        except OSError as exc:
            raise CaisError(f"out_dir: cannot remove {stale}: {exc.strerror}") from None
    runner = experiments.get(cfg.task)
    df, timing = split_timing(runner(cfg, out_dir))
    if timing is not None:
        write_csv_atomic(timing_csv, timing)
    write_text_atomic(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))  # only beside a result
    write_csv_atomic(results, df)
    return results


def _describe_failure(exc: Exception) -> tuple[str, int]:
    if isinstance(exc, CaisError):
        return str(exc), EXIT_ERROR
    if os.environ.get("CAIS_DEBUG"):
        traceback.print_exception(exc)
    return (f"internal error: {type(exc).__name__}: {exc} (a bug in cais-sim; set CAIS_DEBUG=1 for the "
            "traceback)"), EXIT_INTERNAL


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _app(cfg: DictConfig) -> None:
    hc = HydraConfig.get()
    sweep = hc.mode == RunMode.MULTIRUN
    point = f"#{hc.job.num} ({' '.join(hc.overrides.task) or 'defaults'})" if sweep else ""
    try:
        with progress.reporting(cfg.cosim.progress):
            results = run_task(cfg)
    except KeyboardInterrupt:
        raise
    except Exception as exc:  # noqa: BLE001 - every failure becomes one line (or one sweep point)
        if cancel.cancelled():  # an engine that died of the same Ctrl-C is no error of its own
            raise KeyboardInterrupt from None
        message, code = _describe_failure(exc)
        if not cfg.out_dir:
            discard_run_dir(Path(hc.runtime.output_dir))
        if not sweep:
            _fail(message)
            sys.exit(code)
        _fail(f"point {point}: {message}")
        _sweep["failed"].append((point, message))
        return
    import pandas as pd

    from harness import experiments

    df = pd.read_csv(results)
    shown = experiments.display_columns(cfg.task)
    if shown:
        df = df[[c for c in shown if c in df.columns]]
    with pd.option_context("display.max_columns", 30, "display.width", 160):
        print(df.to_string(index=False))
    print(f"results: {results}", flush=True)
    if sweep:
        _sweep["done"].append((point, results))


def _sweep_summary() -> int:
    done, failed = _sweep["done"], _sweep["failed"]
    if not done and not failed:
        return 0
    print(f"sweep: {len(done)} of {len(done) + len(failed)} points succeeded", file=sys.stderr)
    for point, message in failed:
        print(f"  failed {point}: {message.splitlines()[0]}", file=sys.stderr)
    return EXIT_SWEEP_FAILED if failed else 0


def _on_sigint(signum, frame) -> None:
    cancel.cancel()  # worker threads see the flag; this thread unwinds by KeyboardInterrupt
    raise KeyboardInterrupt


def main() -> None:
    argv = sys.argv[1:]
    signal.signal(signal.SIGINT, _on_sigint)
    try:
        if argv and argv[0] == "describe":
            from harness.config import describe

            sys.exit(describe.main(argv[1:]))
        if any(a in ("--help", "-h") for a in argv):
            from harness.config import describe

            print(describe.usage())
            return
        precheck(argv)
        _app()
    except CaisError as exc:
        _fail(str(exc))
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        print("cais-sim: interrupted (engines stopped; the interrupted run wrote no results)", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(_sweep_summary())


if __name__ == "__main__":
    main()
