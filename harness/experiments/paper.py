"""experiment=paper: every figure experiment (paper.figures), one after another, each in
<out_dir>/<figure>/ exactly as ``cais-sim experiment=<figure> out_dir=<out_dir>/<figure>`` would
make it (paper.overrides adds a figure's own overrides: conf/paper/tiny.yaml). Results: one row
per figure with its points, failures and rows; each figure's wall time goes to timing.csv
(what docs/REPRODUCE.md records per figure). Then ``cais-report <out_dir>``."""
from __future__ import annotations

import time
from pathlib import Path

import pandas as pd
from omegaconf import DictConfig, OmegaConf

from harness.config.precheck import check_out_dir
from harness.errors import ConfigError
from harness.experiments.figure import point_overrides, run_figure
from harness.results import write_text_atomic


def run(cfg: DictConfig, out_dir: Path) -> pd.DataFrame:
    from hydra import compose
    from hydra.core.hydra_config import HydraConfig

    if not cfg.paper.figures:
        raise ConfigError("paper.figures", "is empty; give at least one figure experiment, e.g. [fig2,fig11]")
    common = point_overrides(list(HydraConfig.get().overrides.task))
    rows = []
    for name in cfg.paper.figures:
        extra = list(cfg.paper.overrides.get(name, []))
        try:
            # the figure's own extras may sweep an axis (scheme=a,b): run_figure expands them
            fcfg = compose(config_name="config", overrides=[f"experiment={name}", *common],
                           return_hydra_config=True)
        except Exception as exc:  # noqa: BLE001 - a figure that cannot compose is bad input
            raise ConfigError(f"paper.figures ({name})", str(exc).strip().splitlines()[0]) from None
        params = OmegaConf.to_container(fcfg.hydra.sweeper.params) if fcfg.hydra.sweeper.get("params") else {}
        fig_dir = Path(out_dir) / name
        check_out_dir(fig_dir)
        plain = OmegaConf.masked_copy(fcfg, [k for k in fcfg.keys() if k != "hydra"])
        write_text_atomic(fig_dir / "config.yaml", OmegaConf.to_yaml(plain, resolve=False))
        start = time.perf_counter()
        table, failed = run_figure(str(fcfg.figure.name), name, str(fcfg.figure.point_task), params,
                                   [*common, *extra], fig_dir, jobs=int(cfg.figure.jobs))
        rows.append({"figure": name, "points": len(list(p for p in fig_dir.iterdir() if p.name.isdigit())),
                     "failed": failed, "rows": len(table), "wall_s": round(time.perf_counter() - start, 1),
                     "png": f"{name}/{name}.png"})
    return pd.DataFrame(rows)
