"""The engines' C++ unit tests (gtest), run by the same test command as the Python suite."""
from __future__ import annotations

import subprocess

import pytest

# Every gtest binary the build must produce; a missing one fails (gtest not found, target lost).
EXPECTED = ["cais_common_tests", "cais_net_tests", "cais_net_router_tests", "cais_gpu_tests", "cais_fuzz_tests"]


def test_ctest_knows_every_binary(engines):
    listing = subprocess.run(["ctest", "--test-dir", str(engines), "-N"], capture_output=True, text=True).stdout
    for name in EXPECTED:
        assert name in listing, f"{name} is not registered with ctest:\n{listing}"


@pytest.mark.parametrize("binary", EXPECTED)
def test_cpp_unit_tests(engines, binary):
    exe = next((p for p in engines.rglob(binary) if p.is_file()), None)
    assert exe is not None, f"{binary} was not built (is libgtest-dev installed?)"
    proc = subprocess.run([str(exe), "--gtest_brief=1"], capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "PASSED" in proc.stdout
