"""Prepares what ``scripts/gpu-check`` needs on a GPU machine that reaches no package index:
the real models' partitions (``python/shardwise/testing/real_models.py``, lowered here with the pinned jax,
propagated and partitioned for their 8 devices) under ``.gpu/parts/NAME``, the GPT step on one
rank (``gpt_1rank``), the scanned MLP and the LSTM searched by ``auto_shard``
(``auto_NAME``), a partial-manual ``shard_map`` MLP searched inside its body
(``auto_shard_map``), and the dev corpus
under ``.gpu/conformance``. Run here with the test extra installed:

    .venv/bin/python scripts/gpu_prepare.py [NAME ...]

``.gpu`` is git-ignored (``.git/info/exclude``); carry it with the device call."""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# The models are lowered on a 2x4 mesh of CPU devices; set before jax is imported.
os.environ.setdefault("XLA_FLAGS", "--xla_force_host_platform_device_count=8")

import shardwise as sw
from shardwise.search.auto import prepare
from shardwise.search.graph import peak_lower_bound
from shardwise.testing.auto_programs import shard_map_mlp
from shardwise.testing.corpus import conformance_dir
from shardwise.testing.real_models import model_names, plain_model, real_model

MESH = {"data": 2, "model": 4}


def main(names: list[str]) -> None:
    out = ROOT / ".gpu"
    parts = out / "parts"
    shutil.rmtree(parts, ignore_errors=True)
    parts.mkdir(parents=True)
    corpus = conformance_dir()
    if corpus is not None:
        shutil.rmtree(out / "conformance", ignore_errors=True)
        shutil.copytree(corpus / "dev", out / "conformance" / "dev")
    warnings.simplefilter("ignore", sw.UnknownOpWarning)
    for name in names or model_names():
        module = sw.load_mlir(real_model(name).text)
        sw.partition(sw.propagate(module), parts / name)
        size = sum(p.stat().st_size for p in (parts / name).rglob("*") if p.is_file())
        print(f"{name}: {size / 1e6:.1f} MB", flush=True)
    # NCCL takes one rank per GPU: on a machine with a single GPU, launch --backend nccl runs the
    # GPT step lowered without shardings on a 1x1 mesh.
    if not names or "gpt" in names:
        sw.partition(sw.load_mlir(plain_model("gpt").text), parts / "gpt_1rank", mesh={"data": 1, "model": 1})
    # The search inside loops: the scanned MLP and the LSTM un-annotated, searched under 1.3x
    # the least peak any plan can have (collectives inside the loop bodies), then partitioned.
    for name in ("scan_mlp", "lstm"):
        if names and name not in names:
            continue
        plain = sw.load_mlir(plain_model(name).text)
        budget = int(1.3 * peak_lower_bound(prepare(plain, MESH).graph))
        sw.partition(plain, parts / f"auto_{name}", mesh=MESH, search=True, memory_budget=budget, time_limit=8)
        print(f"auto_{name}: searched under {budget} bytes per device", flush=True)
    # The search inside a shard_map (manual data, free model axis) under a budget that splits
    # its weights on the free axis inside the body.
    if not names or "shard_map" in names:
        weights = (32 * 64 + 64 * 32) * 4
        sw.partition(shard_map_mlp({"data"}), parts / "auto_shard_map", search=True, memory_budget=weights // 2 + 6 * 1024, time_limit=8)
        print("auto_shard_map: searched", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
