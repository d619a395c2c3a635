"""Reading the row files of validate_* experiments (validate.input): all checks up front.

Every bad row is refused before anything is simulated, with the file, the line and the row's
name: an empty file, a header without rows, a missing column, a size written with a unit
(``64MiB``) or a size that is zero or negative.
"""
from __future__ import annotations

import csv
import math
from pathlib import Path

import pandas as pd

from harness import REPO_ROOT
from harness.errors import ConfigError

KEY = "validate.input"
INT64_MAX = 2**63 - 1


def resolve(value, default: Path) -> Path:
    """validate.input as a path (relative to the working directory, else to the repository)."""
    path = Path(value) if value else default
    if not path.is_absolute() and not path.is_file() and (REPO_ROOT / path).is_file():
        path = REPO_ROOT / path
    if not path.is_file():
        raise ConfigError(KEY, f"{path} {'is not a file' if path.exists() else 'not found'}; allowed: a CSV file")
    return path


def check_fields(path: Path, key: str = KEY) -> None:
    """Every row has as many fields as the header: pandas reads a file whose rows all have one
    field more as an index column plus shifted values, silently."""
    try:
        with open(path, newline="") as f:
            rows = csv.reader(f)
            header = next(rows, None)
            for line, row in enumerate(rows, start=2):
                if header is not None and row and len(row) != len(header):
                    raise ConfigError(key, f"{path} line {line} has {len(row)} fields, the header {len(header)}")
    except (UnicodeDecodeError, csv.Error, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(key, f"{path} is not a readable CSV: {first}") from None


def read(path: Path, required: list[str]) -> pd.DataFrame:
    """The file's rows; ConfigError unless it parses, has every required column and a row."""
    check_fields(path)
    try:
        df = pd.read_csv(path)
    except pd.errors.EmptyDataError:
        raise ConfigError(KEY, f"{path} is empty; allowed: a CSV with the header {','.join(required)} and rows") from None
    except (pd.errors.ParserError, UnicodeDecodeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise ConfigError(KEY, f"{path} is not a readable CSV: {first}") from None
    missing = [c for c in required if c not in df.columns]
    if missing:
        raise ConfigError(KEY, f"{path} lacks columns {missing} (it has {list(df.columns)})")
    if df.empty:
        raise ConfigError(KEY, f"{path} has a header but no rows")
    return df


def where(path: Path, df: pd.DataFrame, i: int) -> str:
    """'FILE line N (name X)' for row i (line 1 is the header)."""
    label = f" (name {df['name'].iloc[i]})" if "name" in df.columns else ""
    return f"{path} line {i + 2}{label}"


def _numbers(raws: list) -> list:
    """Each cell as pd.to_numeric(..., errors="coerce") gives it alone: a number, or NaN. One
    conversion for the column (a Series per cell cost ~1 ms a row, most of reading a file); a
    cell past 2**53, which a column of floats would round, is converted alone."""
    if all(isinstance(r, int) and not isinstance(r, bool) for r in raws):
        return raws
    numbers = pd.to_numeric(pd.Series(raws, dtype=object), errors="coerce").tolist()
    return [pd.to_numeric(pd.Series([r], dtype=object), errors="coerce").iloc[0]
            if isinstance(n, float) and abs(n) >= 2**53 else n for r, n in zip(raws, numbers)]


def integers(path: Path, df: pd.DataFrame, column: str, minimum: int, optional: bool = False) -> None:
    """Turn `column` into whole numbers >= minimum in place, or refuse the first row that is not
    (blank cells are allowed only when optional)."""
    values = []
    raws = df[column].tolist()
    numbers = _numbers(raws)
    for i, (raw, number) in enumerate(zip(raws, numbers)):
        if optional and pd.isna(raw):
            values.append(pd.NA)
            continue
        if (pd.isna(number) or not math.isfinite(number) or number != int(number) or int(number) < minimum
                or int(number) > INT64_MAX):  # the column is int64
            shown = "" if pd.isna(raw) else raw
            raise ConfigError(KEY, f"{where(path, df, i)}: {column} '{shown}' is not allowed; allowed: a whole "
                              f"number from {minimum} to {INT64_MAX}{' or blank' if optional else ''} "
                              f"(no units: 64MiB is 67108864)")
        values.append(int(number))
    df[column] = pd.array(values, dtype="Int64") if optional else pd.array(values, dtype="int64")


def choices(path: Path, df: pd.DataFrame, column: str, allowed: tuple[str, ...]) -> None:
    for i, value in enumerate(df[column].tolist()):
        if value not in allowed:
            raise ConfigError(KEY, f"{where(path, df, i)}: {column} '{value}' is not one of: {', '.join(allowed)}")
