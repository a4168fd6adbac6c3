"""PyTorch plans run for real (issue 29): for each model of ``torch_models.py`` and each kind
(``forward``; ``step``: forward, loss, backward and one ``torch.optim.AdamW`` step), translate
it (``from_torch`` / ``from_torch_step`` on the mesh), plan it with ``auto_shard`` under a
memory budget below its replicated peak (half the parameters' bytes for the forward, half of
parameters plus AdamW's two states for the step: no replicated plan fits) made to run in
DTensor (``shardwise.torch.fit_plan``: refused placements found on torch's fake process group
and forbidden), then run the plan with DTensor on one gloo CPU process per device
(``shardwise.torch.gloo.run_gloo``) and compare with the module alone in one process.

    python benches/bench_torch_plans.py [--models encoder,resnet18,gpt2,bert] [--kinds forward,step]
        [--mesh data=2,model=4] [--time-limit 10] [-o benches/torch.md]

Tolerances (float32; the sharded run sums the same products in another order): outputs and
loss rtol 1e-5, atol 1e-5 x the output's largest magnitude; gradients normwise, atol 1e-5 x
the largest gradient element of any parameter, rtol 1e-4; parameters after the step rtol 1e-5,
atol 3 % of lr, except elements whose single-process gradient is below 1e-6 of that largest
element (AdamW's first step
moves an element by about lr x sign(gradient), so rounding noise in a near-zero gradient flips
it): those are held to 2 lr and counted. ``SHARDWISE_BENCH_SMOKE=1``: the report goes to
``$SHARDWISE_BENCH_OUT``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
from rich.console import Console
from rich.table import Table

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import torch_models

LR = 1e-3
COLUMNS = [
    "model",
    "kind",
    "ops",
    "budget B (of replicated peak)",
    "peak B",
    "sharded",
    "forbidden",
    "checks",
    "fit s",
    "gloo s",
    "output max abs diff",
    "grad max abs diff / largest grad",
    "param max abs diff / lr (near-zero-grad elems)",
    "result",
]


def _close(got: np.ndarray, want: np.ndarray, rtol: float, atol: float) -> bool:
    return bool(np.all(np.abs(got - want) <= atol + rtol * np.abs(want)))


def _replicated_peak(program: Any, time_limit: float) -> int:
    # The peak per device of auto_shard's plan with every argument's axes forbidden (the
    # user's placements dropped): the budget stays below it, so that no plan with replicated
    # arguments fits.
    import shardwise as sw
    from shardwise.torch import placements
    from shardwise.torch.check import forbid

    axes = set(next(iter(program.meshes.values())).axis_names)
    bare = program.copy()
    for arg in bare.func().body.args:  # without the user's placements too
        arg.sharding = None
    _, report = sw.auto_shard(forbid(bare, {n: axes for n in placements(bare)}), time_limit=time_limit)
    return int(report.peak_memory)


def one(name: str, kind: str, mesh: dict[str, int], time_limit: float, console: Console) -> list[str]:
    import shardwise as sw
    import torch
    from shardwise.torch import FitBudgetError, fit_plan
    from shardwise.torch.check import TrainStep
    from shardwise.torch.gloo import GlooStep, run_gloo, single_process

    case = torch_models.CASES[name]
    factory = f"{HERE / 'torch_models.py'}:{name}{'_eval' if kind == 'forward' else ''}"
    module = getattr(torch_models, factory.rsplit(":", 1)[1])()
    args = tuple(torch.from_numpy(x) for x in case.inputs.values())
    target = torch.from_numpy(case.target)
    loss_fn = getattr(torch_models, case.loss)
    param_bytes = sum(p.numel() * p.element_size() for p in module.parameters())
    placed = {k: tuple(v)[: len(mesh)] for k, v in case.placements.items()}  # a 1-D mesh: the first axis's
    if kind == "forward":
        program = sw.from_torch(module, args, mesh=mesh, in_placements=placed)
        budget, step, gstep = param_bytes // 2, None, None
    else:
        opt = torch.optim.AdamW(module.parameters(), lr=LR, weight_decay=0.01)
        program = sw.from_torch_step(module, loss_fn, args, target, opt, mesh=mesh, in_placements=placed)
        budget, step = param_bytes * 3 // 2, TrainStep(loss_fn, target, opt)
        gstep = GlooStep(
            f"{HERE / 'torch_models.py'}:{case.loss}", case.target, "AdamW", {"lr": LR, "weight_decay": 0.01}
        )
    ops = sum(1 for _ in program.walk())
    replicated = _replicated_peak(program, time_limit)
    t = time.perf_counter()
    known: list[Any] = []
    checks = 0  # over every budget tried
    while True:  # the budget, raised while DTensor's refusals make it unreachable
        try:
            with console.status(f"{name} {kind}: auto_shard + DTensor checks") as status:
                fit = fit_plan(
                    program,
                    module,
                    args,
                    memory_budget=budget,
                    time_limit=time_limit,
                    step=step,
                    forbidden=known,
                    log=lambda s: status.update(s[:100]),
                )
            break
        except FitBudgetError as e:
            known, least, checks = e.forbidden, e.report.peak_memory, checks + e.checks
            raised = (least + replicated) // 2
            console.print(
                f"  {name} {kind}: budget {budget:,} B unreachable ({e}); raised to {raised:,} B", highlight=False
            )
            if raised <= budget or least >= replicated:
                raise
            budget = raised
    fit_s = time.perf_counter() - t
    for f in fit.forbidden:
        console.print(
            f"  {name} {kind}: forbidden {f.axis!r} on {f.name} (+{len(f.also)}): {f.error[:160]}", highlight=False
        )
    shape = [mesh[a] for a in mesh]
    t = time.perf_counter()
    with console.status(f"{name} {kind}: {np.prod(shape)} gloo processes"):
        got = run_gloo(factory, fit.plan, case.inputs, shape, step=gstep)
    gloo_s = time.perf_counter() - t
    want = single_process(factory, case.inputs, step=gstep)
    out_d = float(np.abs(got.output - want.output).max())
    ok = _close(got.output, want.output, 1e-5, 1e-5 * float(np.abs(want.output).max()))
    grad_cell = param_cell = "-"
    if gstep is not None:
        assert got.loss is not None and want.loss is not None
        ok &= abs(got.loss - want.loss) <= 1e-5 * abs(want.loss) + 1e-7
        worst_g, worst_p, noisy = 0.0, 0.0, 0
        # Scaled by the largest gradient of any parameter: some are zero in exact arithmetic
        # (the attention's key biases: softmax is shift-invariant), so their own largest
        # element is rounding noise.
        scale = max(float(np.abs(w).max()) for w in want.gradients.values()) or 1.0
        for n, w in want.gradients.items():
            g = got.gradients[n]
            worst_g = max(worst_g, float(np.abs(g - w).max()) / scale)
            ok &= _close(g, w, 1e-4, 1e-5 * scale)
            noise = np.abs(w) < 1e-6 * scale
            p, q = got.parameters[n], want.parameters[n]
            worst_p = max(worst_p, float(np.abs(p - q)[~noise].max(initial=0.0)) / LR)
            ok &= _close(p[~noise], q[~noise], 1e-5, 0.03 * LR) and bool(np.all(np.abs(p - q)[noise] <= 2 * LR))
            noisy += int(noise.sum())
        grad_cell, param_cell = f"{worst_g:.1e}", f"{worst_p:.3f} ({noisy})"
    sharded = sum(any(p[0] != "replicate" for p in ps) for ps in fit.plan.values())
    return [
        name,
        kind,
        f"{ops:,}",
        f"{budget:,} ({budget / replicated:.0%})",
        f"{fit.report.peak_memory:,}",
        f"{sharded}/{len(fit.plan)}",
        str(len(fit.forbidden)),
        str(checks + fit.checks),
        f"{fit_s:.0f}",
        f"{gloo_s:.0f}",
        f"{out_d:.1e}",
        grad_cell,
        param_cell,
        "pass" if ok else "FAIL",
    ]


def main(argv: list[str] | None = None) -> int:
    from shardwise.files import write_atomic

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--models", default="encoder,resnet18,gpt2,bert")
    p.add_argument("--kinds", default="forward,step")
    p.add_argument("--mesh", default="data=2,model=4")
    p.add_argument("--time-limit", type=float, default=10.0)
    default = Path(os.environ.get("SHARDWISE_BENCH_OUT", HERE)) / "torch.md"
    p.add_argument("-o", "--output", default=str(default))
    a = p.parse_args(argv)
    mesh = {k: int(v) for k, v in (kv.split("=") for kv in a.mesh.split(","))}
    console = Console()
    rows = []
    for name in a.models.split(","):
        for kind in a.kinds.split(","):
            rows.append(one(name, kind, mesh, a.time_limit, console))
            console.print(" | ".join(rows[-1]), highlight=False)
    table = Table(*COLUMNS, title=f"auto_shard plans fitted to DTensor, run on gloo (mesh {a.mesh})")
    for r in rows:
        table.add_row(*r)
    console.print(table)
    lines = [
        "# PyTorch plans on gloo processes",
        "",
        (
            f"`python benches/bench_torch_plans.py --models {a.models} --kinds {a.kinds} --mesh {a.mesh}`"
            f" on {os.cpu_count()} cores, {time.strftime('%Y-%m-%d')}. Tolerances: the script's docstring."
        ),
        "",
        "| " + " | ".join(COLUMNS) + " |",
        "|" + "---|" * len(COLUMNS),
        *("| " + " | ".join(r) + " |" for r in rows),
        "",
    ]
    write_atomic(a.output, "\n".join(lines))
    return 0 if all(r[-1] == "pass" for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
