"""Fuzzing the harness's parsers: a seeded mutator and a run loop (docs/FUZZING.md).

Every input must either parse or raise ConfigError whose message is one line; any other
exception, a multi-line message or an input that runs past the time limit is a finding. The
engines' decoders are fuzzed by the C++ targets of external/fuzz (same mutations, libFuzzer).
"""
from __future__ import annotations

import random
import signal
import time
import traceback
from dataclasses import dataclass, field
from typing import Callable

from harness.errors import ConfigError

_INTERESTING = ["", "0", "-1", "1e309", "nan", "inf", "-0", "2147483648", "18446744073709551616", "64MiB",
                "null", "true", "[]", "{}", "${oc.env:HOME}", "${x}", "'", '"', ",", "=", ";", "//", "\\",
                "\x00", "\xff", "é", "\n", " ", "{{0,1}}", "(", ")", "[1,2", "a" * 300]


def mutate_text(text: str, other: str, rng: random.Random) -> str:
    """1..6 edits of `text`: characters flipped, inserted, erased or copied, interesting tokens
    put in, a splice with `other`, a truncation."""
    s = text
    for _ in range(rng.randint(1, 6)):
        op = rng.randrange(7)
        at = rng.randint(0, len(s))
        if op == 0 and s:
            i = rng.randrange(len(s))
            s = s[:i] + chr(rng.choice([rng.randrange(32, 127), rng.randrange(0, 256)])) + s[i + 1:]
        elif op == 1:
            s = s[:at] + rng.choice(_INTERESTING) + s[at:]
        elif op == 2 and s:
            s = s[:at] + s[at + rng.randint(1, 12):]
        elif op == 3 and s:
            i = rng.randrange(len(s))
            s = s[:at] + s[i:i + rng.randint(1, 24)] + s[at:]
        elif op == 4 and other:
            s = s[:at] + other[rng.randrange(len(other)):]
        elif op == 5:
            s = s[:at]
        elif op == 6 and s:  # replace a token (between separators) by an interesting one
            i = rng.randrange(len(s))
            j = i
            while j < len(s) and s[j] not in "=,;\n ":
                j += 1
            s = s[:i] + rng.choice(_INTERESTING) + s[j:]
    return s


class Hang(BaseException):
    """An input ran longer than the time limit. Not an Exception: the code under test turns every
    Exception of Hydra's into a ConfigError, which made a slow composition an empty refusal."""


def _alarm(signum, frame):
    raise Hang()


@dataclass
class Target:
    """One parser: `run` takes an input (a str, or a list of str for command lines)."""

    name: str
    seeds: list
    run: Callable
    mutate: Callable  # (seed, other seed, rng) -> input


@dataclass
class Report:
    target: str
    inputs: int = 0
    accepted: int = 0
    rejected: int = 0
    seconds: float = 0.0
    slowest_ms: float = 0.0
    findings: list[str] = field(default_factory=list)

    def merge(self, other: "Report") -> None:
        self.inputs += other.inputs
        self.accepted += other.accepted
        self.rejected += other.rejected
        self.seconds += other.seconds
        self.slowest_ms = max(self.slowest_ms, other.slowest_ms)
        self.findings += other.findings

    def line(self) -> str:
        rate = self.inputs / self.seconds if self.seconds else 0.0
        hangs = sum(1 for f in self.findings if f.startswith("hang"))
        return (f"{self.target}: {self.inputs} inputs ({self.accepted} accepted, {self.rejected} refused), "
                f"{self.seconds:.1f} s, {rate:.0f} exec/s, slowest {self.slowest_ms:.1f} ms, "
                f"{len(self.findings) - hangs} crashes, {hangs} hangs")


def check_one(target: Target, value, limit_s: float) -> str | None:
    """None when `value` parses or is refused with a one-line ConfigError, else the finding."""
    signal.setitimer(signal.ITIMER_REAL, limit_s)
    try:
        target.run(value)
        return None
    except ConfigError as exc:
        text = str(exc)
        if not text.strip() or "\n" in text.strip():
            return f"unclear refusal of {value!r}: {text!r}"
        return "refused"
    except Hang:
        return f"hang (> {limit_s} s) on {value!r}"
    except Exception as exc:  # noqa: BLE001 - any other type is a finding
        tb = traceback.extract_tb(exc.__traceback__)[-1]
        return f"{type(exc).__name__}: {exc} at {tb.filename}:{tb.lineno} on {value!r}"
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)


def run(target: Target, runs: int, seed: int = 1, limit_s: float = 5.0, max_findings: int = 10,
        seed_limit_s: float = 120.0) -> Report:
    """The seeds, then `runs` mutations of them; stops after max_findings findings. A seed may take
    max(limit_s, seed_limit_s): the first ones pay for the imports and compositions."""
    rng = random.Random(seed)
    old = signal.signal(signal.SIGALRM, _alarm)
    report = Report(target.name)
    t0 = time.perf_counter()
    try:
        for i in range(len(target.seeds) + runs):
            if i < len(target.seeds):
                value = target.seeds[i]
            else:
                value = target.mutate(rng.choice(target.seeds), rng.choice(target.seeds), rng)
            t = time.perf_counter()
            outcome = check_one(target, value, limit_s if i >= len(target.seeds) else max(limit_s, seed_limit_s))
            report.slowest_ms = max(report.slowest_ms, (time.perf_counter() - t) * 1e3)
            report.inputs += 1
            if outcome is None:
                report.accepted += 1
            elif outcome == "refused":
                report.rejected += 1
            else:
                report.findings.append(outcome)
                if len(report.findings) >= max_findings:
                    break
    finally:
        signal.signal(signal.SIGALRM, old)
        report.seconds = time.perf_counter() - t0
    return report
