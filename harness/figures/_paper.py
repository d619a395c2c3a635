"""The paper's numbers (harness/data/paper: copied from the project's reference CSVs) and the
helpers the figure modules share: scheme names as the paper writes them, geomeans, rows for the
comparison with the paper."""
from __future__ import annotations

import math
from functools import lru_cache

import pandas as pd

from harness import REPO_ROOT
from harness.figures.tolerances import TOLERANCES

PAPER_DIR = REPO_ROOT / "harness" / "data" / "paper"
SCHEME_LABELS = {
    "tp_nvls": "TP-NVLS", "sp_nvls": "SP-NVLS", "coconet": "CoCoNet", "fuselib": "FuseLib", "t3": "T3",
    "coconet_nvls": "CoCoNet-NVLS", "fuselib_nvls": "FuseLib-NVLS", "t3_nvls": "T3-NVLS", "ladm": "LADM",
    "cais_base": "CAIS-Base", "cais_wo_coord": "CAIS-w/o-Coord", "cais_partial": "CAIS-Partial", "cais": "CAIS",
}
CAIS = "cais"


def label(scheme: str) -> str:
    return SCHEME_LABELS.get(scheme, scheme)


@lru_cache(maxsize=None)
def csv(name: str) -> pd.DataFrame:
    return pd.read_csv(PAPER_DIR / name)


def finding(fid: str) -> float:
    f = csv("findings.csv")
    return float(f.loc[f["id"] == fid, "paper_value"].iloc[0])


def geomean(values) -> float:
    vals = [float(v) for v in values if v == v and v > 0]
    return math.exp(sum(math.log(v) for v in vals) / len(vals)) if vals else float("nan")


def row(quantity: str, simulated: float, paper: float, tolerance: str, note: str = "") -> dict:
    """One comparison: the simulated number beside the paper's, the ratio, within tolerance?"""
    tol = TOLERANCES[tolerance]
    sim = float(simulated) if simulated is not None else float("nan")
    return {"quantity": quantity, "simulated": sim, "paper": float(paper),
            "ratio": sim / paper if paper and sim == sim else float("nan"),
            "tolerance": tol.describe(), "within": tol.within(sim, float(paper)), "note": note}


def relative_to(df: pd.DataFrame, by: list[str], base_scheme: str, column: str = "time_us") -> pd.Series:
    """column / column of base_scheme in the same group (NaN where the base did not run)."""
    base = df[df["scheme"] == base_scheme].set_index(by)[column]
    idx = pd.MultiIndex.from_frame(df[by]) if len(by) > 1 else pd.Index(df[by[0]])
    return pd.Series(df[column].to_numpy() / base.reindex(idx).to_numpy(), index=df.index)
