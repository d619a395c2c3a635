"""Every option of cais-container, declared once (the command line takes its defaults from here)."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from harness import REPO_ROOT

DOCKERFILE = REPO_ROOT / "Dockerfile"


def dockerfile_default_base() -> str:
    """The Dockerfile's own default for BASE_IMAGE (so that the default lives in one place)."""
    match = re.search(r"^ARG BASE_IMAGE=(\S+)", DOCKERFILE.read_text(), re.MULTILINE)
    if match is None:
        raise RuntimeError(f"{DOCKERFILE}: no 'ARG BASE_IMAGE=<default>' line")
    return match.group(1)


@dataclass
class ImageSettings:
    """The image every subcommand works on."""

    image: str = "cais-sim:latest"
    """Tag of the image that `build` makes and `test` and `reproduce` run."""


@dataclass
class BuildSettings(ImageSettings):
    """How `cais-container build` makes the image."""

    base_image: str = field(default_factory=dockerfile_default_base)
    """Image to build on (the Dockerfile's BASE_IMAGE); pulled if absent."""
    fallback_base_image: str = "cais-debian-base:bookworm"
    """Tag of the local base built with debootstrap when base_image cannot be pulled."""
    debian_suite: str = "bookworm"
    """Debian release that debootstrap installs into the fallback base."""
    debian_mirror: str = "http://deb.debian.org/debian"
    """Debian mirror for debootstrap (and, through the fallback base's sources.list, for apt)."""
    debootstrap: bool = False
    """Build the base with debootstrap without trying to pull base_image first."""
    ca_certs: list[Path] = field(default_factory=list)
    """Extra CA certificates (PEM) installed into the image's trust store before apt and pip run."""
    no_cache: bool = False
    """Rebuild every step instead of reusing the engine's cached layers."""


@dataclass
class RunSettings(ImageSettings):
    """How `cais-container test` and `reproduce` run the image."""

    out: Path = Path("cais-results")
    """Host directory that receives a reproduction's results (results.csv, config.yaml, ...)."""
