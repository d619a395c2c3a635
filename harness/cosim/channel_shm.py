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
# (a busy window of a paper-scale layer sends about 1.6 MB; a larger batch streams). A ring's
# pages are touched only where packets flow, but all rings together stay within PEER_RINGS_BYTES
# however finely a run is split (40 engines: 1,560 rings).
PEER_RING_BYTES = 1 << 22
PEER_RINGS_BYTES = 1 << 29


def peer_ring_bytes(engines: int) -> int:
    """Bytes of each peer ring for `engines` processes (0: one process, no rings); a power of two,
    as the segment sizes rings."""
    if engines < 2:
        return 0
    share = max(1 << 16, min(PEER_RING_BYTES, PEER_RINGS_BYTES // (engines * (engines - 1))))
    return 1 << (share.bit_length() - 1)


class ShmChannel:
    # A wait sleeps in slices this long, so a dead engine is noticed within about a millisecond.
    liveness_poll_s = 0.001
    # Engines exchange packet batches through peer rings; WindowDone and Advance only say where.
    direct_batches = True

    def __init__(self, names: list[str], spin_us: int):
        self._m = load()
        try:
            self._hub = self._m.create(len(names), RING_BYTES, peer_ring_bytes(len(names)))
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
