"""Building the image through the Docker SDK, streaming the build log with step progress."""
from __future__ import annotations

import collections
import re
import time
from typing import Callable, Iterable

from harness.container.base_image import ensure_base
from harness.container.context import context_members, make_context
from harness.container.engine import ContainerError, errors
from harness.container.settings import BuildSettings

TAIL_LINES = 30
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")  # the engine colours a step's stderr
ENGINE_NOISE = ("Removing intermediate container", " ---> ")
STEP_SHOWN_CHARS = 90


def failure_message(step: str, error: str, tail: list[str]) -> str:
    """One line naming the step and why it failed, then that step's last output lines."""
    shown = step if len(step) <= STEP_SHOWN_CHARS else step[:STEP_SHOWN_CHARS] + " ..."
    code = re.search(r"returned a non-zero code: (\d+)", error)
    reason = f"the command exited with code {code.group(1)}" if code else error.strip()
    if any("CERTIFICATE_VERIFY_FAILED" in line for line in tail):
        reason += " (TLS verification failed: behind an intercepting proxy, pass its CA with --ca-cert FILE)"
    output = "\n".join(tail) if tail else "(no output)"
    return f"image build failed at {shown}: {reason}\n--- output of that step (last lines) ---\n{output}"


def follow_build(chunks: Iterable[dict], log: Callable[[str], None], clock=time.monotonic) -> None:
    """Print the engine's build stream, each step with its elapsed time; raise on a failed step
    with that step's last output lines."""
    start = clock()
    step = "(before the first step)"
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    for chunk in chunks:
        if "error" in chunk:
            message = chunk.get("errorDetail", {}).get("message") or chunk["error"]
            raise ContainerError(failure_message(step, message, list(tail)))
        for line in ANSI_ESCAPE.sub("", chunk.get("stream", "")).splitlines():
            if line.startswith("Step "):
                step = line.strip()
                tail.clear()
                elapsed = int(clock() - start)
                log(f"[{elapsed // 60:3d}:{elapsed % 60:02d}] {step}")
            elif line.strip():
                if not line.startswith(ENGINE_NOISE):
                    tail.append(line.rstrip())
                log(f"    {line.rstrip()}")
        if "status" in chunk:  # a pull inside the build (not with the default settings)
            log(f"    {chunk['status']} {chunk.get('progress', '')}".rstrip())


def build_image(client, settings: BuildSettings, log: Callable[[str], None]) -> None:
    base = ensure_base(client, settings, log)
    with make_context(settings.ca_certs) as context:
        log(f"building {settings.image} on {base} ({len(context_members(context))} paths in the context, "
            f"{len(settings.ca_certs)} extra CA certificate(s))")
        try:
            # network_mode=host: the RUN steps reach apt and PyPI as the host does.
            stream = client.api.build(fileobj=context, custom_context=True, tag=settings.image,
                                      buildargs={"BASE_IMAGE": base}, network_mode="host", rm=True,
                                      forcerm=True, nocache=settings.no_cache, pull=False, decode=True)
            follow_build(stream, log)
        except errors().APIError as exc:
            raise ContainerError(f"image build failed: {exc.explanation or exc}") from None
    image = client.images.get(settings.image)
    log(f"built {settings.image} ({image.short_id})")
