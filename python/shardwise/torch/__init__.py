"""Plans for PyTorch (issue 29): a program from ``shardwise.from_torch`` planned, as DTensor
placements per parameter, checked to run in DTensor, and applied to the module.

* :mod:`~shardwise.torch.plans`: ``placements(program)`` (the shardings of ``@main``'s
  arguments as DTensor placements), ``distribute(module, plan, device_mesh)``, tables.
* :mod:`~shardwise.torch.check`: ``dtensor_error`` (does DTensor run a plan: one run on torch's
  fake process group) and ``fit_plan`` (``auto_shard`` until DTensor runs the plan).
* :mod:`~shardwise.torch.model`: ``load_factory`` and ``plan_model`` (the ``torch-plan``
  command's steps).
* :mod:`~shardwise.torch.gloo`: ``run_gloo`` (a plan run on one gloo CPU process per device,
  forward and a training step) and ``single_process`` (the same, unsplit).

torch is imported only by the functions that need it.
"""

from shardwise.torch.check import FitBudgetError, FitResult, Forbidden, TrainStep, dtensor_error, fit_plan
from shardwise.torch.gloo import GlooResult, GlooStep, run_gloo, single_process
from shardwise.torch.model import load_factory, plan_model
from shardwise.torch.plans import distribute, parse_placements, placements, plan_table, torch_placements

__all__ = [
    "FitBudgetError",
    "FitResult",
    "Forbidden",
    "GlooResult",
    "GlooStep",
    "TrainStep",
    "distribute",
    "dtensor_error",
    "fit_plan",
    "load_factory",
    "parse_placements",
    "placements",
    "plan_model",
    "plan_table",
    "run_gloo",
    "single_process",
    "torch_placements",
]
