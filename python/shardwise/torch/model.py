"""A torch model's plan from the command line or a script: ``load_factory`` (``module:factory``)
and ``plan_model`` (translate, search or propagate, check in DTensor)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shardwise.api import propagate
from shardwise.errors import ProgramError
from shardwise.importers.pytorch import from_torch
from shardwise.mesh import Mesh
from shardwise.search.auto import auto_shard
from shardwise.torch.check import FitResult, dtensor_error, fit_plan
from shardwise.torch.plans import placements

__all__ = ["load_attribute", "load_factory", "plan_model"]


def load_attribute(target: str) -> Any:
    """The object ``module:name`` names (``module`` is imported, or a ``.py`` path is loaded).
    Raises ``ProgramError`` for a target not of that form or a module or attribute that does
    not exist."""
    import importlib
    import importlib.util
    import os
    import sys

    mod_name, sep, attr = target.rpartition(":")
    if not sep or not mod_name or not attr:
        raise ProgramError(f"model: expected module:factory (e.g. mypkg.models:make), got {target!r}")
    try:
        if mod_name.endswith(".py") or os.sep in mod_name:
            name = "shardwise_user_" + "".join(c if c.isalnum() else "_" for c in os.path.abspath(mod_name))
            spec = importlib.util.spec_from_file_location(name, mod_name)
            if spec is None or spec.loader is None:
                raise ImportError(f"cannot load {mod_name}")
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # as an import would (dataclasses look it up)
            spec.loader.exec_module(module)
        else:
            module = importlib.import_module(mod_name)
        return getattr(module, attr)
    except (ImportError, AttributeError, OSError) as e:
        raise ProgramError(f"model {target!r}: {e}") from None


def load_factory(target: str) -> Any:
    """The model ``module:factory`` names, ``factory()`` called with no arguments (see
    :func:`load_attribute`). Raises ``ProgramError`` as that does, or when the factory raises."""
    factory = load_attribute(target)
    try:
        return factory()
    except Exception as e:  # noqa: BLE001 - the user's factory: its error, on one line
        raise ProgramError(f"model {target!r}: its factory raised {type(e).__name__}: {e}") from None


def plan_model(
    model: Any,
    example_args: Sequence[Any],
    mesh: Mesh | Mapping[str, int],
    *,
    in_placements: Mapping[str, Sequence[Any]] | None = None,
    memory_budget: int | str | None = None,
    time_limit: float = 10.0,
    check: bool = True,
    log: Callable[[str], None] | None = None,
) -> FitResult:
    """The plan of a torch module: ``from_torch`` on ``mesh`` with ``in_placements``, then with
    ``memory_budget`` (bytes per device) ``auto_shard`` (``time_limit`` seconds a search) made
    to give a plan DTensor runs (:func:`shardwise.torch.check.fit_plan`: refused placements
    found and forbidden, stated in ``FitResult.forbidden``), else propagation from the
    placements, whose DTensor error (when ``check``) is ``FitResult.error``. ``check=False``:
    no DTensor run (``auto_shard``'s plan as it is). The checks run the model on torch's fake
    process group in child processes (a calling script needs multiprocessing's ``__main__``
    guard), and none may be initialized here. Raises what those raise."""
    program = from_torch(model, example_args, mesh=mesh, in_placements=in_placements)
    if memory_budget is None:
        plan = placements(propagate(program))
        error = dtensor_error(model, plan, example_args, list(program_mesh_shape(program))) if check else None
        return FitResult(plan, None, checks=int(check), error=error)
    if not check:
        planned, report = auto_shard(program, memory_budget=memory_budget, time_limit=time_limit)
        return FitResult(placements(planned), report)
    return fit_plan(program, model, example_args, memory_budget=memory_budget, time_limit=time_limit, log=log)


def program_mesh_shape(program: Any) -> tuple[int, ...]:
    """The sizes of the axes of ``program``'s one mesh, in order."""
    mesh = next(iter(program.meshes.values()))
    return tuple(mesh.shape[a] for a in mesh.axis_names)
