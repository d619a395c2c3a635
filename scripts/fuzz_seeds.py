#!/usr/bin/env python3
"""Record the seed corpora of the engine fuzz targets (tests/data/fuzz) from real runs.

Runs a few small simulations in this process with the harness's send path wrapped, and writes
what each engine was sent: its Configure and first windows (engine_host), the Configure of each
engine (packet_batch_configure) and the packet batches it received (packet_batch), and the
serialized workloads (workload); the BookSim configs of conf/booksim seed the booksim target.

    .venv/bin/python scripts/fuzz_seeds.py [OUT_DIR]      # default tests/data/fuzz
"""
from __future__ import annotations

import argparse
import shutil
import struct
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from harness.config.precheck import compose_one  # noqa: E402
from harness.cosim import runner  # noqa: E402
from harness.protocol import cosim as pb  # noqa: E402

# Small runs whose messages cover the packet types of both engines, over ZeroMQ: the harness
# relays their packet batches (over shared memory they go engine to engine and it sees none).
# Laid out by kind (one engine of all 8 GPUs, one of the switches): the fuzz tests take
# gpu_engine0's Configure as the one hosting GPUs 0..7 (external/fuzz/tests/test_fuzz_short.cc).
BY_KIND = ["cosim.gpus_per_process=8", "cosim.switches_per_process=4"]
RUNS = {
    "traffic": ["system=xbar8", "traffic.requests_per_gpu=6", "cosim.transport=ipc", *BY_KIND],
    "layer": ["model=tiny", "system=dgx_h100_half", "phase=training", "workload=sublayer_l3",
              "scheme=coconet_nvls", "cosim.transport=ipc", *BY_KIND],
}
WINDOWS_KEPT = 3  # windows with inbound batches kept per engine (seeds stay small)
PACKETS_KEPT = 12  # packets kept per batch


# A packet record (external/common/include/cais/packet_records.h): a 112-byte head whose last two
# u32 are the lines and the values that follow it as 8-byte words (lines - 1 and n_values).
RECORD_HEAD_BYTES = 112


def trim(batch: bytes) -> bytes:
    b = pb.PacketBatch()
    b.ParseFromString(batch)
    pos = 0
    for _ in range(min(b.packets, PACKETS_KEPT)):
        lines, values = struct.unpack_from("<II", b.records, pos + RECORD_HEAD_BYTES - 8)
        pos += RECORD_HEAD_BYTES + 8 * (lines - 1 + values)
    b.records = b.records[:pos]
    b.packets = min(b.packets, PACKETS_KEPT)
    return b.SerializeToString()


def join(messages: list[list[bytes]]) -> bytes:
    """The engine-host targets' input encoding (external/fuzz/include/cais/fuzz/targets.h)."""
    out = bytearray()
    for frames in messages:
        out.append(len(frames))
        for f in frames:
            out += struct.pack("<I", len(f)) + f
    return bytes(out)


def record(overrides: list[str]) -> dict[int, list[list[bytes]]]:
    sent: dict[int, list[list[bytes]]] = {}
    original = runner.Coordinator.send

    def send(self, idx, ctl_bytes, frames=None):
        sent.setdefault(idx, []).append([bytes(ctl_bytes), *(trim(bytes(f)) for f in frames or [])])
        return original(self, idx, ctl_bytes, frames)

    runner.Coordinator.send = send
    try:
        from harness import experiments

        cfg = compose_one(overrides)
        with tempfile.TemporaryDirectory() as d:
            experiments.get(cfg.task)(cfg, Path(d))
    finally:
        runner.Coordinator.send = original
    return sent


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out_dir", nargs="?", type=Path, default=REPO / "tests/data/fuzz",
                    help="where the corpora go (default tests/data/fuzz)")
    out = ap.parse_args().out_dir
    dirs = {n: out / n for n in ("engine_host", "packet_batch_configure", "packet_batch", "workload", "booksim")}
    for d in dirs.values():
        shutil.rmtree(d, ignore_errors=True)
        d.mkdir(parents=True)
    configures: list[tuple[str, bytes]] = []
    batches: list[tuple[str, list[list[bytes]]]] = []
    for run, overrides in RUNS.items():
        for idx, messages in record(overrides).items():
            name = f"{run}-engine{idx}"
            ctl = pb.Control()
            ctl.ParseFromString(messages[0][0])
            if ctl.WhichOneof("msg") == "configure":
                configures.append((name, messages[0][0]))
                if ctl.configure.workload:
                    (dirs["workload"] / f"{run}.pb").write_bytes(ctl.configure.workload)
            with_batches = [m[1:] for m in messages if len(m) > 1][:WINDOWS_KEPT]
            if with_batches:
                batches.append((name, with_batches))
            head = messages[:1 + WINDOWS_KEPT]
            tail = [m for m in messages[-2:] if m not in head]  # GetStats, Shutdown
            (dirs["engine_host"] / f"{name}.bin").write_bytes(join(head + tail))
    order = sorted(n for n, _ in configures)
    for name, data in configures:
        (dirs["packet_batch_configure"] / f"{name}.pb").write_bytes(data)
    for name, windows in batches:  # first byte: which Configure (sorted by file name) receives them
        (dirs["packet_batch"] / f"{name}.bin").write_bytes(bytes([order.index(name)]) + join(windows))
    for cfg in sorted((REPO / "conf/booksim").glob("*.cfg")):
        shutil.copy(cfg, dirs["booksim"] / cfg.name)
    for d in dirs.values():
        files = list(d.iterdir())
        print(f"{d}: {len(files)} files, {sum(f.stat().st_size for f in files)} bytes")


if __name__ == "__main__":
    main()
