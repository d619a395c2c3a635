"""Where the native engine binaries live, and how to build them."""
from __future__ import annotations

import os
import subprocess
from pathlib import Path

from harness import REPO_ROOT
from harness.errors import ConfigError

ENGINE_BINARY = "cais-engine"


def engine_dir() -> Path:
    """Directory holding cais-engine and the standalone mains (override: CAIS_ENGINE_DIR)."""
    env = os.environ.get("CAIS_ENGINE_DIR")
    return Path(env) if env else REPO_ROOT / "build" / "external"


def engine_binary(name: str = ENGINE_BINARY, executable: bool = True) -> Path:
    """A file the engine build produces (cais-engine, or a library beside it such as libcais_shm.so)."""
    path = engine_dir() / name
    if not path.is_file() or (executable and not os.access(path, os.X_OK)):
        raise ConfigError(
            "engine binary",
            f"{path} not found or not executable; build the engines with scripts/build_engines.sh "
            "(or set CAIS_ENGINE_DIR to the directory that holds them)",
        )
    return path


def build(jobs: int = 2) -> Path:
    """Configure and build external/ into engine_dir()."""
    out = engine_dir()
    subprocess.run(["cmake", "-S", str(REPO_ROOT / "external"), "-B", str(out), "-DCMAKE_BUILD_TYPE=Release"],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["cmake", "--build", str(out), "-j", str(jobs)], check=True)
    return out
