"""cais-sim: one run (or a Hydra multirun sweep) of an experiment.

    cais-sim                                  # default: the configured system and workload
    cais-sim system=xbar8 seed=3 out_dir=/tmp/r
    cais-sim experiment=validate_kernels validate.input=cases.csv out_dir=DIR
    cais-sim -m seed=1,2,3

Every run writes <out_dir>/results.csv (atomically, only on success) and the resolved config
beside it (config.yaml). Errors are one line naming the key or file at fault.
"""
from __future__ import annotations

import re
import sys
from pathlib import Path

import hydra
from hydra.core.hydra_config import HydraConfig
from omegaconf import DictConfig, OmegaConf

from harness import CONF_DIR
from harness.config.schema import register
from harness.errors import CaisError
from harness.results import write_csv_atomic, write_text_atomic

register()


def _out_dir(cfg: DictConfig) -> Path:
    if cfg.out_dir:
        return Path(cfg.out_dir)
    return Path(HydraConfig.get().runtime.output_dir)


def run_task(cfg: DictConfig) -> Path:
    from harness import experiments

    out_dir = _out_dir(cfg)
    out_dir.mkdir(parents=True, exist_ok=True)
    results = out_dir / "results.csv"
    if results.exists():
        results.unlink()  # a failed rerun must not leave the old file looking like its result
    runner = experiments.get(cfg.task)
    write_text_atomic(out_dir / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    df = runner(cfg, out_dir)
    write_csv_atomic(results, df)
    return results


@hydra.main(version_base="1.3", config_path=str(CONF_DIR), config_name="config")
def _app(cfg: DictConfig) -> None:
    try:
        results = run_task(cfg)
    except CaisError as exc:
        print(f"cais-sim: error: {exc}", file=sys.stderr)
        sys.exit(2)
    import pandas as pd

    df = pd.read_csv(results)
    with pd.option_context("display.max_columns", 30, "display.width", 160):
        print(df.to_string(index=False))
    print(f"results: {results}")


def _one_line(exc: BaseException) -> str:
    """Hydra/OmegaConf errors span several lines; users get the key, the problem, the choices."""
    texts = []
    e: BaseException | None = exc
    while e is not None:
        texts.append(str(e))
        e = e.__cause__ or e.__context__
    text = "\n".join(texts)
    lines = [l.strip() for l in text.splitlines() if l.strip()]
    key = next((l.split(":", 1)[1].strip() for l in lines if l.startswith("full_key:")), "")
    if "Available options in" in text:
        missing = re.search(r"Could not find '([^']+)'", text)
        opts = [l for l in lines[lines.index(next(l for l in lines if l.startswith("Available options"))) + 1:]
                if not l.startswith(("Config search path", "provider=", "Set the environment"))]
        what = missing.group(1) if missing else "config"
        return f"{what}: no such config; available: {', '.join(opts)}"
    m = re.search(r"Key '([^']+)' (?:is )?not in", text)
    if m:
        return f"{key or m.group(1)}: unknown config key (see `cais-sim --cfg job` for every key)"
    detail = next((l for l in lines if not l.startswith(("Could not override", "Error merging", "To append",
                                                         "full_key", "reference_type", "object_type",
                                                         "Set the environment"))), lines[0] if lines else "")
    return f"{key}: {detail}" if key else detail


def _precheck(argv: list[str]) -> None:
    """Compose the config once up front so that a bad override fails as one clear line."""
    if any(a in ("-m", "--multirun", "--help", "-h", "--hydra-help", "--info") or a.startswith(("--cfg", "-c"))
           for a in argv):
        return
    overrides = [a for a in argv if not a.startswith("-")]
    from hydra import compose, initialize_config_dir

    try:
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            compose(config_name="config", overrides=overrides)
    except Exception as exc:  # Hydra and OmegaConf raise many types; all are user errors here
        print(f"cais-sim: error: {_one_line(exc)}", file=sys.stderr)
        sys.exit(2)


def main() -> None:
    _precheck(sys.argv[1:])
    _app()


if __name__ == "__main__":
    main()
