"""cais-report DIR... : the figures under DIR (figure experiments, or experiment=paper's folder)
as one Markdown and one self-contained HTML report (figures embedded as base64): every figure,
every number beside the paper's with the ratio and whether it is within the tolerance the project
states (harness/figures/tolerances.py), the points that failed, and each figure's table.

    cais-report DIR [DIR...] [--out FOLDER]     # writes FOLDER/report.md and report.html (FOLDER: the first DIR)
    cais-report DIR --csv FILE                  # also every run's results.csv as one table

Folders without figures (plain runs and sweeps) are listed as one table, as before.
"""
from __future__ import annotations

import argparse
import base64
import html
import json
import sys
from pathlib import Path

import pandas as pd

from harness.figures import FIGURE_FILE
from harness.results import write_text_atomic

COLUMNS = ["quantity", "simulated", "paper", "ratio", "tolerance", "within"]


def collect(dirs: list[str]) -> pd.DataFrame:
    """Every results.csv under dirs as one frame (column ``run``: its folder)."""
    frames = []
    for d in dirs:
        for path in sorted(Path(d).rglob("results.csv")):
            df = _table(path)
            df.insert(0, "run", str(path.parent))
            frames.append(df)
    if not frames:
        raise FileNotFoundError(f"no results.csv under {', '.join(dirs)}")
    df = pd.concat(frames, ignore_index=True)
    # A column of integers (bytes, counts) that some runs lack would turn float (524288.0) for
    # the missing rows' NaN: keep it integer, missing values empty.
    ints = {c for f in frames for c in f.columns if pd.api.types.is_integer_dtype(f[c])}
    floats = {c for f in frames for c in f.columns if pd.api.types.is_float_dtype(f[c])}
    for c in ints - floats:
        df[c] = df[c].astype("Int64")
    return df


# What harness/figures.finish writes into every figure.json and the report reads.
RECORD_KEYS = {"name": str, "title": str, "png": str, "points": int, "failed": list}


class BadRecord(ValueError):
    """A figure.json the report cannot read: its path and what is wrong."""


def read_record(path: Path) -> dict:
    try:
        record = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise BadRecord(f"{path}: not a figure record ({exc}); re-run the figure to rewrite it") from None
    if not isinstance(record, dict):
        raise BadRecord(f"{path}: not a figure record (a JSON object is expected); re-run the figure")
    for key, kind in RECORD_KEYS.items():
        if not isinstance(record.get(key), kind):
            raise BadRecord(f"{path}: not a figure record ('{key}' missing or not a {kind.__name__}); "
                            "re-run the figure to rewrite it")
    return record


def find_figures(dirs: list[str]) -> list[tuple[Path, dict]]:
    found = []
    for d in dirs:
        for path in sorted(Path(d).rglob(FIGURE_FILE)):
            found.append((path.parent, read_record(path)))
    order = ["fig2", "fig11", "fig12", "fig13", "fig14", "fig15", "fig16", "fig17", "fig18", "table2"]
    return sorted(found, key=lambda f: (order.index(f[1]["name"]) if f[1]["name"] in order else 99, str(f[0])))


def _fmt(v) -> str:
    if v is None or (isinstance(v, float) and v != v):
        return "–"
    if isinstance(v, bool):
        return "yes" if v else "**no**"
    if isinstance(v, float):
        return f"{v:.4g}"
    return str(v)


def _table(path: Path) -> pd.DataFrame:
    """A figure's results.csv; empty when no point finished (the file has no columns then)."""
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _comparison(fig: dict) -> pd.DataFrame:
    df = pd.DataFrame(fig.get("paper") or [], columns=COLUMNS)
    return df


def _md_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "_none_\n"
    head = "| " + " | ".join(df.columns) + " |\n|" + "---|" * len(df.columns) + "\n"
    return head + "".join("| " + " | ".join(_fmt(v) for v in r) + " |\n" for r in df.itertuples(index=False))


def _html_table(df: pd.DataFrame) -> str:
    if df.empty:
        return "<p><i>none</i></p>"
    head = "".join(f"<th>{html.escape(str(c))}</th>" for c in df.columns)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(v)).replace('**', '')}</td>" for v in r) + "</tr>"
                   for r in df.itertuples(index=False))
    return f"<table><tr>{head}</tr>{body}</table>"


def _summary(figs: list[tuple[Path, dict]]) -> pd.DataFrame:
    rows = []
    for d, f in figs:
        comp = _comparison(f)
        within = comp["within"].dropna() if not comp.empty else pd.Series(dtype=object)
        rows.append({"figure": f["name"], "points": f["points"], "cached": f.get("cached", 0),
                     "failed": len(f["failed"]), "compared": len(comp),
                     "within": f"{int(sum(bool(w) for w in within))}/{len(within)}"})
    return pd.DataFrame(rows)


def markdown(figs: list[tuple[Path, dict]], out: Path) -> str:
    parts = ["# CAIS co-simulator: the paper's figures\n",
             "Every number beside the paper's; `within`: inside the tolerance the project states "
             "(harness/figures/tolerances.py).\n", _md_table(_summary(figs))]
    for d, f in figs:
        png = d / f["png"]
        parts.append(f"\n## {f['name']}: {f['title']}\n")
        if png.is_file():
            rel = Path(png).resolve().relative_to(out.resolve()) if png.resolve().is_relative_to(out.resolve()) else png
            parts.append(f"![{f['name']}]({rel.as_posix()})\n")
        parts.append("\n### Beside the paper\n\n" + _md_table(_comparison(f)))
        if f["failed"]:
            parts.append("\n### Failed points\n\n" + _md_table(pd.DataFrame(f["failed"])[["label", "message"]]))
        parts.append("\n### Results\n\n" + _md_table(_table(d / "results.csv")))
    return "".join(parts)


def html_page(figs: list[tuple[Path, dict]]) -> str:
    style = ("body{font-family:sans-serif;max-width:1100px;margin:auto} table{border-collapse:collapse;"
             "font-size:12px;margin:8px 0} td,th{border:1px solid #ccc;padding:2px 6px} img{max-width:100%}")
    parts = [f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>CAIS figures</title><style>{style}"
             "</style></head><body><h1>CAIS co-simulator: the paper's figures</h1>",
             "<p>within: inside the tolerance the project states (harness/figures/tolerances.py).</p>",
             _html_table(_summary(figs))]
    for d, f in figs:
        parts.append(f"<h2>{html.escape(f['name'])}: {html.escape(f['title'])}</h2>")
        png = d / f["png"]
        if png.is_file():
            data = base64.b64encode(png.read_bytes()).decode()
            parts.append(f"<img alt='{html.escape(f['name'])}' src='data:image/png;base64,{data}'>")
        parts.append("<h3>Beside the paper</h3>" + _html_table(_comparison(f)))
        if f["failed"]:
            parts.append("<h3>Failed points</h3>" + _html_table(pd.DataFrame(f["failed"])[["label", "message"]]))
        parts.append("<h3>Results</h3>" + _html_table(_table(d / "results.csv")))
    return "".join(parts) + "</body></html>\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="cais-report", description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", help="folder for report.md and report.html (default: the first DIR)")
    ap.add_argument("--csv", help="also write every run's results as one table here")
    args = ap.parse_args(argv)
    missing = [d for d in args.dirs if not Path(d).is_dir()]
    if missing:
        print(f"cais-report: error: {missing[0]}: no such folder", file=sys.stderr)
        sys.exit(2)
    try:
        figs = find_figures(args.dirs)
    except BadRecord as exc:
        print(f"cais-report: error: {exc}", file=sys.stderr)
        sys.exit(2)
    if args.csv or not figs:
        try:
            df = collect(args.dirs)
        except FileNotFoundError as exc:
            print(f"cais-report: error: {exc}", file=sys.stderr)
            sys.exit(2)
        if not figs:
            with pd.option_context("display.max_columns", 40, "display.width", 200):
                print(df.to_string(index=False))
        if args.csv:
            from harness.results import write_csv_atomic

            write_csv_atomic(Path(args.csv), df)
    if figs:
        out = Path(args.out or args.dirs[0])
        try:
            write_text_atomic(out / "report.md", markdown(figs, out))
            write_text_atomic(out / "report.html", html_page(figs))
        except Exception as exc:  # noqa: BLE001 - one line, never a traceback
            print(f"cais-report: error: {exc}", file=sys.stderr)
            sys.exit(2)
        print(_summary(figs).to_string(index=False))
        print(f"report: {out / 'report.md'} and {out / 'report.html'}")


if __name__ == "__main__":
    main()
