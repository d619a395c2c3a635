"""The build context: the repository as .dockerignore leaves it, plus the extra CA certificates.

The context is a tar made here (not `docker build <dir>`) so that a certificate given with
--ca-cert joins the build without being written into the working tree.
"""
from __future__ import annotations

import tarfile
import tempfile
from pathlib import Path
from typing import IO

from harness import REPO_ROOT
from harness.container.engine import ContainerError

CA_DIR_IN_CONTEXT = "scripts/ca-certificates"  # the Dockerfile copies it into the trust store
PEM_MARKER = b"-----BEGIN CERTIFICATE-----"


def ignore_patterns(root: Path) -> list[str]:
    path = root / ".dockerignore"
    if not path.exists():
        return []
    lines = (line.strip() for line in path.read_text().splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def check_ca_cert(path: Path) -> None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise ContainerError(f"--ca-cert {path}: cannot read it ({exc.strerror})") from None
    if PEM_MARKER not in data:
        raise ContainerError(f"--ca-cert {path}: not a PEM certificate (no '{PEM_MARKER.decode()}' line)")


def make_context(ca_certs: list[Path], root: Path = REPO_ROOT) -> IO[bytes]:
    """An uncompressed tar of the context, rewound, in a temporary file (deleted when closed)."""
    from docker.utils.build import exclude_paths

    for cert in ca_certs:
        check_ca_cert(cert)
    out = tempfile.TemporaryFile()
    with tarfile.open(fileobj=out, mode="w") as tar:
        for rel in sorted(exclude_paths(str(root), ignore_patterns(root), dockerfile="Dockerfile")):
            tar.add(root / rel, arcname=rel, recursive=False)
        for i, cert in enumerate(ca_certs):
            # update-ca-certificates installs only *.crt; the index keeps equal names apart.
            tar.add(cert, arcname=f"{CA_DIR_IN_CONTEXT}/extra-{i}-{cert.stem}.crt", recursive=False)
    out.seek(0)
    return out


def context_members(context: IO[bytes]) -> list[str]:
    """Names in a context tar (for tests and the build's one-line summary)."""
    context.seek(0)
    with tarfile.open(fileobj=context, mode="r") as tar:
        names = tar.getnames()
    context.seek(0)
    return names
