"""The engines' C++ unit tests (gtest), run by the same test command as the Python suite."""
from __future__ import annotations

import subprocess

import pytest

EXPECTED = ["cais_common_tests", "cais_net_tests", "cais_gpu_tests"]


@pytest.mark.parametrize("binary", EXPECTED)
def test_cpp_unit_tests(engines, binary):
    exe = engines / binary.replace("cais_", "").split("_tests")[0] / binary
    if not exe.exists():
        exe = next(engines.rglob(binary), None)
    assert exe is not None and exe.exists(), f"{binary} was not built (is libgtest-dev installed?)"
    proc = subprocess.run([str(exe), "--gtest_brief=1"], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-2000:]
    assert "PASSED" in proc.stdout
