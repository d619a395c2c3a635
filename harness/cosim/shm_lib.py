"""Loads _cais_shm, the extension that is the harness's end of the shared-memory channel.

The channel protocol (rings, sequence numbers, memory ordering, spinning and sleeping) lives in
C++ (external/common/src/shm_channel.cc) and is shared with the engines; the extension, built
beside cais-engine, only moves bytes objects in and out of it:

    hub = create(engines, ring_bytes[, peer_ring_bytes]); fd(hub)
    send(hub, engine, control[, frames])      # queues; never blocks
    send_many(hub, [(engine, control), ...])  # queues all, then wakes the sleepers
    recv(hub, spin_ns, max_ns)                # None | (engine, control, frames) | (engine, None, reason)
    close(hub)
"""
from __future__ import annotations

import importlib.util
from types import ModuleType

from harness import engines as engine_paths
from harness.errors import ConfigError

MODULE = "_cais_shm"
FILE = MODULE + ".abi3.so"

_module: ModuleType | None = None


def available() -> bool:
    """Whether the engine build made the extension (it needs the Python headers)."""
    return (engine_paths.engine_dir() / FILE).is_file()


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
