"""Parameters of the process host and of the simple "traffic" GPU model."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class TrafficParams:
    """GPU model ``traffic``: every GPU issues remote reads/writes to random peers."""

    requests_per_gpu: int = 20000
    """Remote requests each GPU issues."""
    request_bytes: int = 128
    """Payload of a write, or bytes asked for by a read (one NVLink packet of up to 128 B)."""
    read_fraction: float = 0.5
    """Share of requests that are reads (the rest are writes)."""
    max_outstanding: int = 256
    """Requests a GPU keeps in flight before it waits for completions."""
    issue_gap_ns: float = 0.0
    """Gap between two issues (0: issue whenever a request slot is free)."""


GROUPS = {"traffic": TrafficParams}
