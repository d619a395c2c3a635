"""The _cais_shm extension: the harness's end of the shared-memory channel.

The channel protocol (rings, sequence numbers, memory ordering, spinning and sleeping) lives in
C++ (external/common/src/shm_channel.cc) and is shared with the engines; the extension, built
beside cais-engine, only moves bytes objects in and out of it.
"""
from __future__ import annotations

import importlib.util
from types import ModuleType

from harness import engines as engine_paths
from harness.errors import ConfigError

MODULE = "_cais_shm"
FILE = MODULE + ".abi3.so"

_module: ModuleType | None = None


def load() -> ModuleType:
    global _module
    if _module is None:
        path = engine_paths.engine_dir() / FILE
        if not path.is_file():
            raise ConfigError("cosim.transport", f"shm needs {path}, which the engine build makes when the Python "
                              "headers are installed (python3-dev); rebuild the engines, or use transport=ipc")
        spec = importlib.util.spec_from_file_location(MODULE, path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        _module = module
    return _module


class ShmHub:
    """One shared-memory segment with a ring pair per engine. Close it (or use `with`)."""

    def __init__(self, engines: int, ring_bytes: int):
        self._m = load()
        self._h = self._m.create(engines, ring_bytes)
        self.fd: int = self._m.fd(self._h)

    def send(self, engine: int, control: bytes, frames: list[bytes] | None = None) -> None:
        """Queues control + frames for `engine`; never blocks (a backlog moves while we wait)."""
        self._m.send(self._h, engine, control, frames)

    def recv(self, spin_ns: int, max_ns: int) -> tuple[int, bytes | None, list | str] | None:
        """None after max_ns; (engine, control, frames); or (engine, None, reason) for garbage."""
        return self._m.recv(self._h, spin_ns, max_ns)

    def close(self) -> None:
        """Unmaps the segment and closes its fd; engines keep their own mapping until they exit."""
        if self._h is not None:
            self._m.close(self._h)
            self._h = None

    def __enter__(self) -> "ShmHub":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
