"""Reaching the Docker engine through the Docker SDK, with a one-line error when it cannot be."""
from __future__ import annotations

import os

from harness.errors import CaisError

START_HINT = ("start one (`sudo systemctl start docker`, or as root `dockerd &`; "
              "docs/REPRODUCE.md), or point DOCKER_HOST at a running engine")


class ContainerError(CaisError):
    """Something cais-container cannot do, said in one line (plus an output tail where useful)."""


def _sdk():
    try:
        import docker
    except ImportError:
        raise ContainerError("the Docker SDK for Python is not installed: "
                             "`.venv/bin/python -m pip install -e .` installs it (package 'docker')") from None
    return docker


def connect():
    """A docker.DockerClient for the engine DOCKER_HOST names (default: the local socket)."""
    docker = _sdk()
    where = os.environ.get("DOCKER_HOST", "unix:///var/run/docker.sock")
    try:
        client = docker.from_env()
        client.ping()
    except docker.errors.DockerException as exc:
        reason = str(exc)
        if "Permission denied" in reason or "PermissionError" in reason:
            raise ContainerError(f"no permission to use the Docker engine at {where}: run as root, or add "
                                 "yourself to the 'docker' group (then log in again)") from None
        raise ContainerError(f"no Docker engine reachable at {where}: {START_HINT}") from None
    return client


def errors():
    """The SDK's exception classes (docker.errors), imported only once the SDK is known present."""
    return _sdk().errors
