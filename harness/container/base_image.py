"""The base image: present in the engine, pulled from its registry, or built from Debian's packages.

Where no registry can be reached, debootstrap installs a minimal Debian into a directory from a
Debian mirror (which such machines usually still reach, as apt does), and `docker import` makes
that directory an image. debootstrap and the tar of its tree need root (sudo where not root).
"""
from __future__ import annotations

import collections
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Callable

from harness.container.engine import ContainerError, errors
from harness.container.settings import BuildSettings

# docker import sets no environment; the Dockerfile's RUN steps need a PATH.
IMPORT_CHANGES = ["ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", 'CMD ["/bin/bash"]']
TAIL_LINES = 20


def present(client, name: str) -> bool:
    try:
        client.images.get(name)
        return True
    except errors().ImageNotFound:
        return False


def pull(client, name: str) -> str | None:
    """Pull the image; None when done, else the registry's reason in one line."""
    from docker.utils import parse_repository_tag

    repo, tag = parse_repository_tag(name)
    try:
        client.images.pull(repo, tag=tag or "latest")
        return None
    except errors().APIError as exc:
        return str(exc.explanation or exc).splitlines()[0]


def ensure_base(client, settings: BuildSettings, log: Callable[[str], None]) -> str:
    """Name of the image to build on."""
    if not settings.debootstrap:
        if present(client, settings.base_image):
            log(f"base image {settings.base_image}: present")
            return settings.base_image
        log(f"base image {settings.base_image}: pulling")
        reason = pull(client, settings.base_image)
        if reason is None:
            return settings.base_image
        log(f"base image {settings.base_image}: cannot pull it ({reason})")
    if present(client, settings.fallback_base_image):
        log(f"base image {settings.fallback_base_image}: present (built earlier with debootstrap)")
        return settings.fallback_base_image
    log(f"base image {settings.fallback_base_image}: building it from Debian's packages "
        f"(debootstrap {settings.debian_suite} from {settings.debian_mirror})")
    build_debian_base(client, settings, log)
    return settings.fallback_base_image


def _as_root() -> list[str]:
    if os.geteuid() == 0:
        return []
    if shutil.which("sudo") is None:
        raise ContainerError("building the Debian base image needs root (debootstrap): run "
                             "`cais-container build` as root once, or install sudo")
    return ["sudo"]


def _run_logged(cmd: list[str], what: str, log: Callable[[str], None]) -> None:
    """Run cmd, streaming its output; on failure, a ContainerError with the output's tail."""
    tail: collections.deque[str] = collections.deque(maxlen=TAIL_LINES)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
        for line in proc.stdout:
            tail.append(line.rstrip())
            log(f"    {line.rstrip()}")
    if proc.returncode != 0:
        raise ContainerError(f"{what} failed (exit {proc.returncode})\n--- last lines ---\n" + "\n".join(tail))


def build_debian_base(client, settings: BuildSettings, log: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ContainerError("debootstrap not found, and the base image cannot be pulled: install it "
                             "(`sudo apt-get install debootstrap`), or load a base image (`docker load`) "
                             "and name it with --base-image")
    sudo = _as_root()
    start = time.monotonic()
    work = Path(tempfile.mkdtemp(prefix="cais-debootstrap-"))  # TMPDIR: needs ~0.5 GB
    rootfs, archive = work / "rootfs", work / "rootfs.tar"
    try:
        _run_logged([*sudo, debootstrap, "--variant=minbase", settings.debian_suite, str(rootfs),
                     settings.debian_mirror], "debootstrap", log)
        _run_logged([*sudo, "tar", "--numeric-owner", "-C", str(rootfs), "-cf", str(archive), "."],
                    "tar of the debootstrap tree", log)
        from docker.utils import parse_repository_tag

        repo, tag = parse_repository_tag(settings.fallback_base_image)
        client.api.import_image_from_file(str(archive), repository=repo, tag=tag or "latest",
                                          changes=IMPORT_CHANGES)
    finally:
        subprocess.run([*sudo, "rm", "-rf", "--one-file-system", str(work)], check=False)
    if not present(client, settings.fallback_base_image):
        raise ContainerError(f"docker import did not produce {settings.fallback_base_image}")
    log(f"base image {settings.fallback_base_image}: imported ({time.monotonic() - start:.0f} s for debootstrap and import)")
