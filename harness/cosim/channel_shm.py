"""The harness's end of the shared-memory transport (engines on this host, started by us).

The segment is a memfd: it has no name in /dev/shm and disappears when the harness and the
engines have all closed it, however they end. Engines inherit its fd.
"""
from __future__ import annotations

from harness.cosim.channel_errors import BadMessage
from harness.cosim.shm_lib import ShmHub

# Per direction per engine. Packet batches of a window are typically a few KB; larger messages
# (Configure with a workload, Stats) stream through the ring.
RING_BYTES = 1 << 18


class ShmChannel:
    # A wait sleeps in slices this long, so a dead engine is noticed within about a millisecond.
    liveness_poll_s = 0.001

    def __init__(self, names: list[str], spin_us: int):
        self.hub = ShmHub(len(names), RING_BYTES)
        self.pass_fds = (self.hub.fd,)
        self.spin_us = spin_us
        self._spin_ns = spin_us * 1000

    def engine_args(self, idx: int) -> list[str]:
        return ["--shm-fd", str(self.hub.fd), "--slot", str(idx), "--spin-us", str(self.spin_us)]

    def send(self, idx: int, control: bytes, frames: list | None = None) -> None:
        self.hub.send(idx, control, frames)

    def poll(self, timeout_s: float, spin: bool = False) -> tuple[int, bytes, list] | None:
        """(engine index, control bytes, batch frames), or None after timeout_s."""
        got = self.hub.recv(self._spin_ns if spin else 0, int(timeout_s * 1e9))
        if got is not None and got[1] is None:
            raise BadMessage(got[0], got[2])
        return got

    def close(self) -> None:
        self.hub.close()
