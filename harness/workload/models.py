"""Model dimensions (conf/model/*.yaml) and the per-GPU quantities derived from them.

Table I of the CAIS paper lists the half-scale models it simulates on 66 SMs; Table II adds
LLaMA-7B at full scale on 132 SMs (../shared/spec/PAPER_SPEC.md section 1.1). ``tiny`` is a
model for tests whose every shard is a whole number of 128-row GEMM tiles on 8 GPUs.
"""
from __future__ import annotations

from dataclasses import dataclass

from harness.errors import ConfigError

ELEM_BYTES = 2  # bf16 everywhere (spec A1)


@dataclass(frozen=True)
class ModelDims:
    name: str
    hidden: int
    ffn_hidden: int
    heads: int
    seq_len: int
    batch: int
    layers: int

    @property
    def tokens(self) -> int:
        return self.seq_len * self.batch

    @property
    def head_dim(self) -> float:
        return self.hidden / self.heads

    def activation_bytes(self) -> int:
        """D: one full activation [T, h] in bf16."""
        return self.tokens * self.hidden * ELEM_BYTES

    def check_tp(self, gpus: int) -> None:
        """Tensor parallelism over `gpus` needs whole shards of every partitioned dimension."""
        for key, value in (("model.hidden", self.hidden), ("model.ffn_hidden", self.ffn_hidden)):
            if value % gpus:
                raise ConfigError(key, f"{value} is not divisible by the {gpus} GPUs of tensor parallelism")
        if self.tokens % gpus:
            raise ConfigError("model.seq_len", f"tokens seq_len x batch = {self.tokens} is not divisible by "
                              f"the {gpus} GPUs of sequence parallelism")
        if self.heads < gpus:
            raise ConfigError("model.heads", f"{self.heads} heads cannot be split over {gpus} GPUs")


def from_config(model_cfg) -> ModelDims:
    dims = ModelDims(name=str(model_cfg.name), hidden=int(model_cfg.hidden), ffn_hidden=int(model_cfg.ffn_hidden),
                     heads=int(model_cfg.heads), seq_len=int(model_cfg.seq_len), batch=int(model_cfg.batch),
                     layers=int(model_cfg.layers))
    for key in ("hidden", "ffn_hidden", "heads", "seq_len", "batch", "layers"):
        if getattr(dims, key) <= 0:
            raise ConfigError(f"model.{key}", f"must be > 0, got {getattr(dims, key)}")
    return dims
