"""The SM clock a Hopper GPU settles at under its power limit.

Board power at SM clock f with n SMs busy on kernels of one load kind:

    P(f, n, tensor) = P_static + n * a_tensor * g(f),   g(f) = (f / f_max) * (V(f) / V_max)^2,
    P(f, n, memory) = P_static + P_memory * g(f),
    V(f) / V_max = v0 + (1 - v0) * f / f_max        (linear voltage-frequency curve)

(dynamic power ~ C V^2 f per active SM for tensor-core kernels; a memory-bound kernel's power is
the memory system's, measured the same on 33 to 132 SMs within ~100 W, so not per SM). The GPU settles at the
highest f with P <= the power limit, capped at the maximum boost clock. An H100 SXM on all 132 SMs
of a large GEMM hits its 700 W limit at ~1350-1450 MHz; on a 66-SM partition at ~1700-1850 MHz;
on 33 SMs it stays at 1980 MHz (harness/data/measured/h100_power.csv, scripts/fit_power.py).

Real power management settles over tens of milliseconds, far longer than one kernel, so one clock
per run (or per validated kernel) is the model: ``gpu.clock_mhz`` = 0 asks for it, > 0 fixes it.
Before it settles a fast limiter holds board power under a higher limit within microseconds
(``power_burst_limit_w``): the SMs' own cycle counters read 1600-1780 MHz through 45 ms of
back-to-back GEMMs from an idle H200 while NVML read 1980 (harness/data/measured/
h200_burst_clock.csv). ``burst_clock_mhz`` is that clock, for runs that model such bursts.
"""
from __future__ import annotations

from typing import Any, Mapping

from harness.errors import ConfigError

KINDS = ("tensor", "memory")


def _g(f_mhz: float, f_max: float, v0: float) -> float:
    x = f_mhz / f_max
    return x * (v0 + (1.0 - v0) * x) ** 2


def _get(p: Mapping[str, Any], key: str) -> float:
    return float(p[key] if key in p else p[f"gpu.{key}"])


def board_power_w(f_mhz: float, active_sms: int, kind: str, p: Mapping[str, Any]) -> float:
    """Modelled board power (W) at SM clock f_mhz with active_sms SMs running `kind` kernels."""
    g = _g(f_mhz, _get(p, "max_clock_mhz"), _get(p, "power_voltage_floor"))
    if kind == "tensor":
        return _get(p, "power_static_w") + active_sms * _get(p, "power_tensor_w_per_sm") * g
    return _get(p, "power_static_w") + _get(p, "power_memory_w") * g  # HBM-bound: not per SM


def settled_clock_mhz(active_sms: int, kind: str, p: Mapping[str, Any], step_mhz: float = 15.0) -> float:
    """Highest clock (MHz, in step_mhz steps: H100 clocks move in 15 MHz steps; 0 for a continuous
    value) with board power <= the limit, at most max_clock_mhz. p: GpuParams fields, with or
    without the 'gpu.' prefix."""
    if kind not in KINDS:
        raise ValueError(f"load kind '{kind}' (allowed: {', '.join(KINDS)})")
    f_max, limit = _get(p, "max_clock_mhz"), _get(p, "power_limit_w")
    if board_power_w(f_max, active_sms, kind, p) <= limit:
        return f_max
    lo, hi = 0.0, f_max
    for _ in range(60):  # bisection: power rises monotonically with f
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if board_power_w(mid, active_sms, kind, p) <= limit else (lo, mid)
    return lo if step_mhz <= 0 else max(step_mhz, step_mhz * int(lo / step_mhz))


def burst_clock_mhz(active_sms: int, kind: str, p: Mapping[str, Any], step_mhz: float = 15.0) -> float:
    """The clock of a burst from an idle GPU, before the power controller settles: the highest
    clock with board power <= power_burst_limit_w (same model, same steps as settled_clock_mhz)."""
    return settled_clock_mhz(active_sms, kind, dict(p, power_limit_w=_get(p, "power_burst_limit_w")), step_mhz)


# Keys the harness consumes here; the engine sees only the resolved gpu.clock_mhz.
MODEL_KEYS = ("gpu.max_clock_mhz", "gpu.power_limit_w", "gpu.power_burst_limit_w", "gpu.power_static_w",
              "gpu.power_tensor_w_per_sm", "gpu.power_memory_w", "gpu.power_voltage_floor")


def resolve_clock(flat: dict[str, Any], kind: str = "tensor") -> dict[str, Any]:
    """flat params for the engine: gpu.clock_mhz = 0 (power-aware) replaced by the settled clock of
    all gpu.num_sms SMs running `kind` kernels (a layer's GEMMs set its power; power management
    settles over milliseconds, longer than a layer), a fixed clock kept; the model's keys removed."""
    check_clocks(flat)
    if "gpu.clock_mhz" in flat and float(flat["gpu.clock_mhz"]) == 0:
        flat["gpu.clock_mhz"] = settled_clock_mhz(int(flat["gpu.num_sms"]), kind, flat)
    return _drop_model_keys(flat)


def check_clocks(flat: dict[str, Any]) -> None:
    """0 asks for the power model's clock; a negative clock is no clock (it read as 0)."""
    for key, meaning in (("gpu.clock_mhz", "0 (the power model's clock)"),
                         ("gpu.clock_mhz_without_mma", "0 (gpu.clock_mhz's)")):
        if key in flat and not float(flat[key]) >= 0:
            raise ConfigError(key, f"must be {meaning} or a clock > 0 MHz, got {flat[key]}")


def _drop_model_keys(flat: dict[str, Any]) -> dict[str, Any]:
    for key in MODEL_KEYS:
        flat.pop(key, None)
    return flat


def resolve_burst_clocks(flat: dict[str, Any]) -> dict[str, Any]:
    """flat params for the engine in a burst from an idle GPU (the measurements of the validation
    experiments: a few milliseconds of work, before the power controller settles): a power-aware
    gpu.clock_mhz (0) replaced by the burst clock of all SMs running tensor kernels, the clock
    while an mma kernel runs, and gpu.clock_mhz_without_mma, where 0, by the memory-bound burst
    clock (the maximum: a memory-bound kernel's power is far below either limit); a fixed clock
    kept, and with it a clock_mhz_without_mma of 0 (the engine's "the same clock"). The model's
    keys removed."""
    check_clocks(flat)
    if "gpu.clock_mhz" in flat and float(flat["gpu.clock_mhz"]) == 0:
        sms = int(flat["gpu.num_sms"])
        flat["gpu.clock_mhz"] = burst_clock_mhz(sms, "tensor", flat)
        if float(flat.get("gpu.clock_mhz_without_mma", 0.0)) == 0:
            flat["gpu.clock_mhz_without_mma"] = burst_clock_mhz(sms, "memory", flat)
    return _drop_model_keys(flat)
