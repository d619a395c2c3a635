"""cais-container: error paths with a mocked Docker SDK (no engine needed), and one end-to-end
reproduction through a real engine, skipped with the reason when none is reachable."""
from __future__ import annotations

import os
from pathlib import Path
from unittest import mock

import docker
import pytest

from harness import REPO_ROOT
from harness.container import base_image, build, cli, context, engine, run
from harness.container.settings import BuildSettings, RunSettings

PEM = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"


def _main(capsys, *argv) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(list(argv))
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return exit_info.value.code, err


def _client(image_present: bool = True) -> mock.MagicMock:
    client = mock.MagicMock()
    if not image_present:
        client.images.get.side_effect = docker.errors.ImageNotFound("no such image")
    return client


# --- no engine -------------------------------------------------------------------------------

def test_no_engine_is_one_line_naming_how_to_start_one(capsys, monkeypatch, tmp_path):
    monkeypatch.setenv("DOCKER_HOST", f"unix://{tmp_path}/absent.sock")  # the real SDK, no engine there
    code, err = _main(capsys, "reproduce", "--out", str(tmp_path / "out"))
    assert code == 2
    assert err.count("\n") == 1 and "no Docker engine reachable" in err and "dockerd" in err
    assert not (tmp_path / "out").exists()  # nothing made before the engine answered


def test_socket_without_permission_says_docker_group(capsys, monkeypatch):
    refused = docker.errors.DockerException("Error while fetching server API version: "
                                            "('Connection aborted.', PermissionError(13, 'Permission denied'))")
    monkeypatch.setattr(docker, "from_env", mock.Mock(side_effect=refused))
    code, err = _main(capsys, "test")
    assert code == 2 and "'docker' group" in err and err.count("\n") == 1


# --- results directory ---------------------------------------------------------------------------

def test_unwritable_out_dir_is_refused_before_any_container(capsys, monkeypatch, tmp_path):
    client = _client()
    monkeypatch.setattr(engine, "connect", lambda: client)
    blocker = tmp_path / "a_file"
    blocker.write_text("")
    code, err = _main(capsys, "reproduce", "--out", str(blocker / "out"))
    assert code == 2 and "results directory not writable" in err and str(blocker / "out") in err
    client.containers.create.assert_not_called()


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes through directory permissions")
def test_read_only_out_dir_is_refused(tmp_path):
    tmp_path.chmod(0o500)
    try:
        with pytest.raises(engine.ContainerError, match="not writable"):
            run.writable_out_dir(tmp_path)
    finally:
        tmp_path.chmod(0o700)


def test_out_dir_override_points_to_the_option(tmp_path):
    with pytest.raises(engine.ContainerError, match="--out DIR"):
        run.reproduce(_client(), RunSettings(out=tmp_path), ["out_dir=/elsewhere"])


def test_missing_image_says_build_first(tmp_path):
    with pytest.raises(engine.ContainerError, match="cais-container build"):
        run.reproduce(_client(image_present=False), RunSettings(out=tmp_path), [])


# --- runs ----------------------------------------------------------------------------------------

def _container(output: bytes, status: int, on_start=lambda: None) -> mock.MagicMock:
    container = mock.MagicMock()
    container.start.side_effect = on_start
    container.logs.return_value = [output[:5], output[5:]]  # chunks split mid-line
    container.wait.return_value = {"StatusCode": status}
    return container


def test_reproduce_runs_as_the_caller_with_out_mounted(tmp_path):
    client = _client()
    client.containers.create.return_value = _container(
        b"sim done\n", 0, on_start=lambda: (tmp_path / "results.csv").write_text("x\n1\n"))
    written = []
    results = run.reproduce(client, RunSettings(out=tmp_path), ["experiment=validate_kernels"], written.append)
    assert results == tmp_path / "results.csv" and "".join(written) == "sim done\n"
    (image, command), options = client.containers.create.call_args
    assert command[0] == ".venv/bin/cais-sim" and "experiment=validate_kernels" in command
    assert f"out_dir={run.RESULTS_MOUNT}" in command
    # out_dir is Hydra's run directory: a hydra.run.dir override would send results.csv elsewhere
    assert not any(c.startswith("hydra.run.dir=") for c in command)
    assert options["user"] == f"{os.getuid()}:{os.getgid()}"
    assert options["volumes"] == {str(tmp_path.resolve()): {"bind": run.RESULTS_MOUNT, "mode": "rw"}}
    client.containers.create.return_value.remove.assert_called_once_with(force=True)


def test_failed_run_reports_exit_code_and_last_line(capsys, monkeypatch, tmp_path):
    client = _client()
    client.containers.create.return_value = _container(
        b"starting\ncais-sim: error: seed: must be >= 0\n", 2)
    monkeypatch.setattr(engine, "connect", lambda: client)
    code, err = _main(capsys, "reproduce", "--out", str(tmp_path), "seed=-1")
    assert code == 2 and "cais-sim exit 2" in err and "seed: must be >= 0" in err
    client.containers.create.return_value.remove.assert_called_once_with(force=True)


def test_failed_test_suite_exits_with_pytest_status(capsys, monkeypatch):
    client = _client()
    client.containers.create.return_value = _container(b"1 failed, 3 passed\n", 1)
    monkeypatch.setattr(engine, "connect", lambda: client)
    code, err = _main(capsys, "test", "-k", "cosim")
    assert code == 1 and "pytest exit 1" in err
    (image, command), _ = client.containers.create.call_args
    assert command == [*run.TEST_COMMAND, "-k", "cosim"]


# --- build ---------------------------------------------------------------------------------------

BUILD_STREAM = [
    {"stream": "Step 1/3 : FROM debian:bookworm-slim\n"},
    {"stream": " ---> 1234\n"},
    {"stream": "Step 2/3 : RUN scripts/setup.sh\n"},
    {"stream": "compiling gpu engine\n"},
    {"stream": "\x1b[91mE: Unable to locate package cmake\n\x1b[0m"},
    {"stream": "Removing intermediate container 43ce49c3ab60\n"},
    {"error": "The command '/bin/sh -c scripts/setup.sh' returned a non-zero code: 100",
     "errorDetail": {"message": "The command '/bin/sh -c scripts/setup.sh' returned a non-zero code: 100"}},
]


def test_build_failure_names_the_step_and_its_output_tail(capsys, monkeypatch):
    client = _client()
    client.api.build.return_value = iter(BUILD_STREAM)
    monkeypatch.setattr(engine, "connect", lambda: client)
    code, err = _main(capsys, "build")
    assert code == 2
    first, *rest = err.splitlines()
    assert first == "cais-container: error: image build failed at Step 2/3 : RUN scripts/setup.sh: the command exited with code 100"
    assert rest[-2:] == ["compiling gpu engine", "E: Unable to locate package cmake"]  # that step's, no colours
    assert client.api.build.call_args.kwargs["network_mode"] == "host"
    assert client.api.build.call_args.kwargs["buildargs"] == {"BASE_IMAGE": BuildSettings().base_image}


def test_tls_failure_in_a_step_suggests_ca_cert():
    message = build.failure_message("Step 11/12 : RUN scripts/setup.sh", "returned a non-zero code: 1",
                                    ["SSLError(SSLCertVerificationError(1, '[SSL: CERTIFICATE_VERIFY_FAILED] ...'))"])
    assert "--ca-cert FILE" in message.splitlines()[0]


def test_build_log_shows_step_progress():
    lines = []
    ticks = iter([0, 0, 75])
    build.follow_build(BUILD_STREAM[:4], lines.append, clock=lambda: next(ticks))
    assert lines == ["[  0:00] Step 1/3 : FROM debian:bookworm-slim", "     ---> 1234",
                     "[  1:15] Step 2/3 : RUN scripts/setup.sh", "    compiling gpu engine"]


def test_unpullable_base_falls_back_to_debootstrap(monkeypatch):
    client = _client(image_present=False)
    client.images.pull.side_effect = docker.errors.APIError("registry unreachable", explanation="no such host")
    built = []
    monkeypatch.setattr(base_image, "build_debian_base", lambda c, s, log: built.append(s.fallback_base_image))
    settings, lines = BuildSettings(), []
    assert base_image.ensure_base(client, settings, lines.append) == settings.fallback_base_image
    assert built == [settings.fallback_base_image] and any("no such host" in line for line in lines)


def test_fallback_without_debootstrap_says_how_to_get_it(monkeypatch):
    monkeypatch.setattr(base_image.shutil, "which", lambda name: None)
    with pytest.raises(engine.ContainerError, match="apt-get install debootstrap"):
        base_image.build_debian_base(_client(), BuildSettings(), print)


def test_context_leaves_out_build_outputs_and_adds_ca_certs(tmp_path):
    cert = tmp_path / "proxy.crt"
    cert.write_text(PEM)
    with context.make_context([cert]) as tar:
        names = set(context.context_members(tar))
    assert {"Dockerfile", "scripts/setup.sh", "pyproject.toml", "scripts/ca-certificates/extra-0-proxy.crt"} <= names
    assert not any(n.split("/")[0] in (".venv", "build", ".git") or "__pycache__" in n for n in names)


def test_bad_ca_cert_is_named(tmp_path):
    not_pem = tmp_path / "key.txt"
    not_pem.write_text("hello")
    with pytest.raises(engine.ContainerError, match=f"--ca-cert {not_pem}: not a PEM"):
        context.make_context([not_pem])
    with pytest.raises(engine.ContainerError, match="cannot read"):
        context.make_context([tmp_path / "absent.crt"])


def test_default_base_is_the_dockerfiles():
    assert f"ARG BASE_IMAGE={BuildSettings().base_image}\n" in (REPO_ROOT / "Dockerfile").read_text()


# --- through a real engine -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def docker_client():
    try:
        return engine.connect()
    except engine.ContainerError as exc:
        pytest.skip(f"needs a Docker engine: {exc}")


def _host_extra_ca_certs() -> list[Path]:
    """The host's own extra CAs (Debian's local trust store), for a build behind a TLS proxy."""
    return sorted(Path("/usr/local/share/ca-certificates").glob("**/*.crt"))


def test_reproduce_through_a_real_engine(docker_client, tmp_path, monkeypatch):
    build.build_image(docker_client, BuildSettings(ca_certs=_host_extra_ca_certs()), print)
    uid, gid = os.getuid(), os.getgid()
    if uid == 0:  # root owns everything anyway: run as someone else to see the uid travel
        uid, gid = 4321, 4321
        monkeypatch.setattr(run.os, "getuid", lambda: uid)
        monkeypatch.setattr(run.os, "getgid", lambda: gid)
        tmp_path.chmod(0o777)
    results = run.reproduce(docker_client, RunSettings(out=tmp_path), ["traffic.requests_per_gpu=50"], print)
    assert results.stat().st_uid == uid and results.stat().st_gid == gid
    header, row = results.read_text().splitlines()
    assert header.startswith("system,gpus,") and row.startswith("dgx_h100,8,")  # the default system ran


def test_debian_base_is_debootstrapped_then_imported(monkeypatch):
    client = _client(image_present=False)
    steps = []
    monkeypatch.setattr(base_image.shutil, "which", lambda name: f"/usr/sbin/{name}")
    monkeypatch.setattr(base_image.os, "geteuid", lambda: 0)
    monkeypatch.setattr(base_image, "_run_logged", lambda cmd, what, log: steps.append(cmd))
    monkeypatch.setattr(base_image, "present", lambda c, name: bool(client.api.import_image_from_file.called))
    settings = BuildSettings(debian_mirror="http://mirror.example/debian")
    base_image.build_debian_base(client, settings, print)
    debootstrap, tar = steps
    assert debootstrap[:3] == ["/usr/sbin/debootstrap", "--variant=minbase", "bookworm"]
    assert debootstrap[-1] == "http://mirror.example/debian" and tar[0] == "tar"
    (archive,), options = client.api.import_image_from_file.call_args
    assert archive == str(Path(debootstrap[3]).parent / "rootfs.tar")
    assert (options["repository"], options["tag"]) == ("cais-debian-base", "bookworm")
    assert any(change.startswith("ENV PATH=") for change in options["changes"])
    assert not Path(debootstrap[3]).parent.exists()  # the work directory is gone
