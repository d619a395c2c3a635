"""The harness's end of the ZeroMQ transport: one ROUTER socket, engines connect as DEALERs."""
from __future__ import annotations

from pathlib import Path

import zmq

from harness.cosim.channel_errors import ChannelError
from harness.errors import ConfigError, EngineError


class ZmqChannel:
    """ipc:// (a socket file in log_dir) or tcp:// (engines may run on other hosts)."""

    # How often a wait looks at the engine processes: ZeroMQ wakes us on a message anyway.
    liveness_poll_s = 0.1
    pass_fds: tuple[int, ...] = ()
    direct_batches = False  # packet batches travel as frames through the harness

    def __init__(self, names: list[str], transport: str, log_dir: Path, tcp_host: str = "127.0.0.1"):
        self.ids = [n.encode() for n in names]
        self.index = {ident: i for i, ident in enumerate(self.ids)}
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.setsockopt(zmq.ROUTER_MANDATORY, 1)
        try:
            if transport == "ipc":
                self.endpoint = f"ipc://{log_dir}/harness.sock"
                self.sock.bind(self.endpoint)
            else:
                port = self.sock.bind_to_random_port(f"tcp://{tcp_host}")
                self.endpoint = f"tcp://{tcp_host}:{port}"
        except zmq.ZMQError as exc:  # an address of another host, a name that does not resolve
            self.sock.close(0)
            if transport == "ipc":
                raise ConfigError("cosim.transport", f"cannot bind {self.endpoint}: {exc}") from None
            raise ConfigError("cosim.tcp_host", f"cannot bind '{tcp_host}': {exc}; allowed: an address of this "
                              "host (127.0.0.1, or 0.0.0.0 for every interface)") from None
        self.poller = zmq.Poller()
        self.poller.register(self.sock, zmq.POLLIN)

    def engine_args(self, idx: int) -> list[str]:
        return ["--connect", self.endpoint]

    def send(self, idx: int, control: bytes, frames: list | None = None) -> None:
        try:
            self.sock.send_multipart([self.ids[idx], control, *(frames or [])], copy=False)
        except zmq.ZMQError as exc:  # EHOSTUNREACH: the engine's socket is gone
            raise ChannelError(str(exc)) from None

    def poll(self, timeout_s: float, spin: bool = False) -> tuple[int, bytes, list] | None:
        """(engine index, control bytes, batch frames), or None after timeout_s."""
        if not self.poller.poll(timeout_s * 1000):
            return None
        frames = self.sock.recv_multipart(copy=False)
        idx = self.index.get(frames[0].bytes)
        if idx is None:
            raise EngineError(frames[0].bytes.decode(errors="replace"), "message from an unknown engine", None)
        return idx, frames[1].bytes, frames[2:]

    def close(self) -> None:
        self.sock.close(0)
