"""Engine processes: start, watch, stop, and read the tail of their stderr."""
from __future__ import annotations

import signal
import subprocess
import tempfile
from pathlib import Path


class EngineProcess:
    """One cais-engine process (or, with launcher=manual, one the user starts by hand)."""

    def __init__(self, name: str, argv: list[str], launch: bool, log_dir: Path, pass_fds: tuple[int, ...] = ()):
        self.name = name
        self.argv = argv
        self.stderr_path = log_dir / f"{name}.stderr"
        self.proc: subprocess.Popen | None = None
        if launch:
            self._stderr = open(self.stderr_path, "wb")
            self.proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=self._stderr,
                                         stdin=subprocess.DEVNULL, pass_fds=pass_fds)

    def exit_code(self) -> int | None:
        """None while running (or when not ours to watch)."""
        return None if self.proc is None else self.proc.poll()

    def stderr_tail(self, lines: int = 20) -> str | None:
        """The last lines of its stderr; None for an engine the user started (not ours to read)."""
        if self.proc is None:
            return None
        try:
            text = self.stderr_path.read_text(errors="replace")
        except OSError:
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def stop(self, grace_s: float = 1.0) -> None:
        if self.proc is None or self.proc.poll() is not None:
            return
        try:
            self.proc.send_signal(signal.SIGCONT)  # a stopped process cannot exit otherwise
            self.proc.terminate()
            self.proc.wait(timeout=grace_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        except ProcessLookupError:
            pass

    def close(self) -> None:
        self.stop()
        if self.proc is not None:
            self._stderr.close()


def make_log_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="cais-engines-"))


def describe_exit(code: int) -> str:
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exited with status {code}"
