"""cais-container: build the co-simulator's image, run its test suite, reproduce experiments.

    cais-container build [--base-image IMG] [--debootstrap] [--ca-cert FILE] [--no-cache]
    cais-container test [PYTEST_ARGS...]
    cais-container reproduce [--out DIR] [OVERRIDES...]   # e.g. experiment=validate_kernels

Everything goes through the Docker SDK for Python. `reproduce` runs `cais-sim` (default: the
default simulation, seconds) with the Hydra overrides given and writes its results to --out,
owned by the calling user. docs/REPRODUCE.md says more.
"""
from __future__ import annotations

import argparse
import dataclasses
import sys
from pathlib import Path

from harness.container import build, engine, run
from harness.container.settings import BuildSettings, RunSettings


def _doc(cls, name: str) -> str:
    """The field's doc string in settings.py, as the option's help (declared once)."""
    import ast
    import inspect

    for klass in cls.__mro__[:-1]:  # the field may be declared in a base class
        body = ast.parse(inspect.getsource(klass)).body[0].body
        for node, after in zip(body, body[1:]):
            if isinstance(node, ast.AnnAssign) and node.target.id == name and isinstance(after, ast.Expr):
                return after.value.value
    raise RuntimeError(f"{cls.__name__}.{name}: no doc string in settings.py")


def _parser() -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(prog="cais-container", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="command", required=True)
    b, r = BuildSettings(), RunSettings()

    p = sub.add_parser("build", help="build the image (scripts/setup.sh inside it)")
    p.add_argument("--image", default=b.image, help=_doc(BuildSettings, "image"))
    p.add_argument("--base-image", default=b.base_image, help=_doc(BuildSettings, "base_image"))
    p.add_argument("--debootstrap", action="store_true", help=_doc(BuildSettings, "debootstrap"))
    p.add_argument("--debian-mirror", default=b.debian_mirror, help=_doc(BuildSettings, "debian_mirror"))
    p.add_argument("--ca-cert", dest="ca_certs", action="append", type=Path, default=[], metavar="FILE",
                   help=_doc(BuildSettings, "ca_certs") + " (may be repeated)")
    p.add_argument("--no-cache", action="store_true", help=_doc(BuildSettings, "no_cache"))

    for name, what in (("test", "run the test suite inside the image (arguments go to pytest)"),
                       ("reproduce", "run cais-sim inside the image (arguments are Hydra overrides)")):
        rest = "PYTEST_ARGS" if name == "test" else "OVERRIDES"
        p = sub.add_parser(name, help=what, allow_abbrev=False,  # the rest passes through as it is
                           usage=f"cais-container {name} [--image IMAGE]"
                                 f"{' [--out DIR]' if name == 'reproduce' else ''} [{rest}...]")
        p.add_argument("--image", default=r.image, help=_doc(RunSettings, "image"))
        if name == "reproduce":
            p.add_argument("--out", type=Path, default=r.out, metavar="DIR", help=_doc(RunSettings, "out"))
    return ap


def _settings(cls, args: argparse.Namespace):
    return cls(**{f.name: getattr(args, f.name) for f in dataclasses.fields(cls) if hasattr(args, f.name)})


def execute(args: argparse.Namespace, log=print) -> None:
    client = engine.connect()
    if args.command == "build":
        build.build_image(client, _settings(BuildSettings, args), lambda line: log(line, flush=True))
    elif args.command == "test":
        run.run_tests(client, _settings(RunSettings, args), args.args)
    else:
        results = run.reproduce(client, _settings(RunSettings, args), args.args)
        log(f"cais-container: results in {results}")


def main(argv: list[str] | None = None) -> None:
    parser = _parser()
    args, passthrough = parser.parse_known_args(argv)  # what is not ours: pytest's or Hydra's
    args.args = passthrough
    if args.command == "build" and args.args:
        parser.error(f"build takes no arguments: {' '.join(args.args)}")
    try:
        execute(args)
    except run.RunFailed as exc:
        print(f"cais-container: error: {exc}", file=sys.stderr)
        sys.exit(exc.exit_code)
    except engine.ContainerError as exc:
        print(f"cais-container: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("cais-container: interrupted (the container was removed)", file=sys.stderr)
        sys.exit(130)
    except Exception as exc:  # the engine refused a request: one line, not a traceback
        if type(exc).__module__.startswith("docker"):
            print(f"cais-container: error: Docker engine: {getattr(exc, 'explanation', None) or exc}",
                  file=sys.stderr)
            sys.exit(2)
        raise


if __name__ == "__main__":
    main()
