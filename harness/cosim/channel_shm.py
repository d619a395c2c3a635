"""The harness's end of the shared-memory transport (engines on this host, started by us).

The segment is a memfd: it has no name in /dev/shm and disappears when the harness and the
engines have all closed it, however they end. Engines inherit its fd.
"""
from __future__ import annotations

from functools import partial

from harness.cosim.channel_errors import BadMessage
from harness.cosim.shm_lib import load
from harness.errors import ConfigError

# Per direction per engine: control messages (larger ones, a Configure with a workload or Stats,
# stream through the ring).
RING_BYTES = 1 << 18
# Per ordered pair of engines: their packet batches, which go straight from engine to engine
# (a busy window of a paper-scale layer sends about 1.6 MB; a larger batch streams).
PEER_RING_BYTES = 1 << 22


class ShmChannel:
    # A wait sleeps in slices this long, so a dead engine is noticed within about a millisecond.
    liveness_poll_s = 0.001
    # Engines exchange packet batches through peer rings; WindowDone and Advance only say where.
    direct_batches = True

    def __init__(self, names: list[str], spin_us: int):
        self._m = load()
        try:
            self._hub = self._m.create(len(names), RING_BYTES, PEER_RING_BYTES if len(names) > 1 else 0)
        except OSError as exc:  # no memory for the segment, a file-size limit
            raise ConfigError("cosim.transport", f"shm: {exc}; cosim.transport=ipc needs no segment") from None
        self.fd: int = self._m.fd(self._hub)
        self.pass_fds = (self.fd,)
        self.spin_us = spin_us
        self._spin_ns = spin_us * 1000
        self._recv = partial(self._m.recv, self._hub)
        # send(idx, control, frames=None): straight into C (one call per message on the hot path).
        self.send = partial(self._m.send, self._hub)
        # send_many([(idx, control), ...]): a window's Advances, the sleeping engines woken last.
        self.send_many = partial(self._m.send_many, self._hub)

    def engine_args(self, idx: int) -> list[str]:
        return ["--shm-fd", str(self.fd), "--slot", str(idx), "--spin-us", str(self.spin_us)]

    def poll(self, timeout_s: float, spin: bool = False) -> tuple[int, bytes, list] | None:
        """(engine index, control bytes, batch frames), or None after timeout_s."""
        got = self._recv(self._spin_ns if spin else 0, int(timeout_s * 1e9))
        if got is not None and got[1] is None:
            raise BadMessage(got[0], got[2])
        return got

    def close(self) -> None:
        """Unmaps the segment and closes its fd; engines keep their own mapping until they exit."""
        self._m.close(self._hub)
