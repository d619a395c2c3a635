"""Errors the user sees as one clear line (the CLI prints them without a traceback)."""


class CaisError(Exception):
    """Base class: anything the user can fix or must know about."""


class ConfigError(CaisError):
    """Bad configuration: names the key and what is allowed."""

    def __init__(self, key: str, message: str):
        super().__init__(f"{key}: {message}" if key else message)
        self.key = key


class EngineError(CaisError):
    """An engine process failed, hung or misbehaved."""

    def __init__(self, engine: str, message: str, stderr_tail: str | None = ""):
        text = f"engine {engine}: {message}"
        tail = (stderr_tail or "").rstrip()
        # An error the engine reported is on its stderr too: a tail that only repeats it adds nothing.
        repeats = bool(tail) and all(message in line for line in tail.splitlines() if line.strip())
        if stderr_tail is not None and not repeats:  # None: no process of ours to read from
            text += f"\n--- stderr of {engine} (last lines) ---\n" + (tail if tail else "(empty)")
        super().__init__(text)
        self.engine = engine
        self.stderr_tail = stderr_tail


class EngineTimeout(EngineError):
    """Engines that should have answered did not within their time (hung, or never started)."""


class SimulationError(CaisError):
    """The simulation itself broke an invariant (deadlock, bytes lost, ...)."""


class Interrupted(KeyboardInterrupt):
    """The user pressed Ctrl-C: raised by a worker that saw the cancellation flag, so that it
    unwinds (stopping its engines) exactly as the main thread does on KeyboardInterrupt."""

    def __init__(self, message: str = "interrupted"):
        super().__init__(message)
