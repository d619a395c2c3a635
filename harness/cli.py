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
from harness import single_run, sweep as sweeps
from harness.config.precheck import precheck
from harness.config.run_dir import discard_run_dir
from harness.config.schema import register
from harness.cosim import cancel, progress
from harness.errors import CaisError

register()

EXIT_ERROR = 2
EXIT_INTERNAL = 3
EXIT_INTERRUPTED = 130  # the shell's convention for a process ended by SIGINT

def _fail(message: str) -> None:
    print(f"cais-sim: error: {message}", file=sys.stderr)


def run_task(cfg: DictConfig, label: str = "") -> single_run.Outcome:
    """Run cfg's experiment in Hydra's run folder (harness/single_run.py: cache, results, status)."""
    return single_run.execute(cfg, Path(HydraConfig.get().runtime.output_dir), label=label)


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
    label = ' '.join(hc.overrides.task) or 'defaults'
    if sweep and cfg.task == "figure":  # a point of a figure's multirun; the figure step follows (harness/sweep.py)
        cfg.task = cfg.figure.point_task
    point = f"#{hc.job.num} ({label})" if sweep else ""
    try:
        with progress.reporting(cfg.cosim.progress):
            outcome = run_task(cfg, label=label if sweep else "")
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
        return
    import pandas as pd

    from harness import experiments

    try:
        df = pd.read_csv(outcome.results)
    except pd.errors.EmptyDataError:  # a figure none of whose points finished: its summary said why
        df = pd.DataFrame()
    shown = experiments.display_columns(cfg.task)
    if shown:
        df = df[[c for c in shown if c in df.columns]]
    if not df.empty:
        with pd.option_context("display.max_columns", 30, "display.width", 160):
            print(df.to_string(index=False))
    print(f"results: {outcome.results}{' (from the cache)' if outcome.cached else ''}", flush=True)
    if outcome.cache_error:
        print(f"cache: this run was not stored ({outcome.cache_error}); cache.dir= names another folder",
              file=sys.stderr, flush=True)


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
        argv = sweeps.one_process_argv(argv)  # experiment=fig11 scheme=a,b without -m (harness/sweep.py)
        sys.argv[1:] = argv
        precheck(argv)
        _app()
    except CaisError as exc:
        _fail(str(exc))
        sys.exit(EXIT_ERROR)
    except KeyboardInterrupt:
        print("cais-sim: interrupted (engines stopped; the interrupted run wrote no results)", file=sys.stderr)
        sys.exit(EXIT_INTERRUPTED)
    sys.exit(sweeps.last_exit)  # a multirun's summary (harness/sweep.py) sets it


if __name__ == "__main__":
    main()
