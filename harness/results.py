"""Result files: written atomically (temp file + rename), so a crash never leaves half a CSV."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd


def write_text_atomic(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def write_csv_atomic(path: Path, df: pd.DataFrame) -> None:
    write_text_atomic(path, df.to_csv(index=False, float_format="%.10g", lineterminator="\n"))
