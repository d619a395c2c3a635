"""The test suite and reproduction runs inside the image, with their output streamed."""
from __future__ import annotations

import collections
import os
import sys
import tempfile
from pathlib import Path
from typing import Callable

from harness.container.engine import ContainerError, errors
from harness.container.settings import RunSettings

WORKDIR = "/opt/cais"       # where the Dockerfile installs the project
RESULTS_MOUNT = "/results"  # where --out appears inside the container
TEST_COMMAND = [".venv/bin/python", "-m", "pytest"]  # the README's test command
SIM_COMMAND = [".venv/bin/cais-sim"]
TAIL_LINES = 20


class RunFailed(ContainerError):
    """The command inside the container exited non-zero (its output was streamed above)."""

    def __init__(self, message: str, exit_code: int):
        super().__init__(message)
        self.exit_code = exit_code


def require_image(client, image: str) -> None:
    try:
        client.images.get(image)
    except errors().ImageNotFound:
        raise ContainerError(f"image {image} not found in the Docker engine: "
                             "build it first with `cais-container build`") from None


def writable_out_dir(out: Path) -> Path:
    """The absolute results directory, created if needed, once a file could be written in it."""
    out = out.expanduser().resolve()
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as exc:
        raise ContainerError(f"--out {out}: results directory not writable by uid {os.getuid()} "
                             f"({exc.strerror}): choose another with --out DIR or fix its permissions") from None
    return out


def run_streamed(client, image: str, command: list[str], write: Callable[[str], None],
                 **options) -> tuple[int, list[str]]:
    """Run command in a new container (no network), stream its output; (exit code, last lines)."""
    container = client.containers.create(image, command, working_dir=WORKDIR, network_mode="none", **options)
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    try:
        container.start()
        pending = ""
        for chunk in container.logs(stream=True, follow=True):
            text = chunk.decode(errors="replace")
            write(text)
            pending += text
            *lines, pending = pending.split("\n")
            tail.extend(lines)
        tail.append(pending)
        code = container.wait()["StatusCode"]
    finally:
        container.remove(force=True)  # also on Ctrl-C: nothing keeps running
    return code, [line for line in tail if line.strip()]


def _stdout(text: str) -> None:
    sys.stdout.write(text)
    sys.stdout.flush()


def run_tests(client, settings: RunSettings, pytest_args: list[str], write=_stdout) -> None:
    require_image(client, settings.image)
    code, _ = run_streamed(client, settings.image, [*TEST_COMMAND, *pytest_args], write)
    if code != 0:
        raise RunFailed(f"the test suite failed in {settings.image} (pytest exit {code}; its output is above)", code)


def _check_overrides(overrides: list[str]) -> None:
    for item in overrides:
        if item.lstrip("+~").split("=", 1)[0] == "out_dir":
            raise ContainerError(f"'{item}': the results directory is set with --out DIR "
                                 f"(it appears as {RESULTS_MOUNT} inside the container)")


def reproduce(client, settings: RunSettings, overrides: list[str], write=_stdout) -> Path:
    """Run cais-sim with the overrides as the calling user; returns the host's results.csv."""
    _check_overrides(overrides)
    require_image(client, settings.image)
    out = writable_out_dir(settings.out)
    # out_dir is also Hydra's run directory (conf/config.yaml), so nothing lands in the install tree.
    command = [*SIM_COMMAND, *overrides, f"out_dir={RESULTS_MOUNT}"]
    code, tail = run_streamed(client, settings.image, command, write,
                              user=f"{os.getuid()}:{os.getgid()}",  # results owned by the caller
                              environment={"HOME": "/tmp"},       # the caller's uid has no home in the image
                              volumes={str(out): {"bind": RESULTS_MOUNT, "mode": "rw"}})
    if code != 0:
        last = tail[-1] if tail else "(no output)"
        raise RunFailed(f"the reproduction run failed in {settings.image} (cais-sim exit {code}): {last}", code)
    results = out / "results.csv"
    if not results.exists():
        raise ContainerError(f"the run ended without {results}: was the directory mounted? "
                             "(with a remote DOCKER_HOST, --out must be a path on the engine's host)")
    return results
