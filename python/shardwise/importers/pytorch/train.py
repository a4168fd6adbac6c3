"""``from_torch_step``: one training step of a PyTorch model as one program: forward, loss,
backward (the joint graph of ``torch.export.experimental._export_forward_backward``, core ATen)
and the update of a ``torch.optim.Adam`` / ``AdamW`` optimizer, with the optimizer state as
arguments and results beside each parameter, so that ``auto_shard`` plans the state with its
parameter (each state argument is marked ``tf.aliasing_output`` to its next value, the pairs
``auto_shard`` carries).

The update is PyTorch's Adam algorithm (``torch.optim.Adam`` documentation; ``amsgrad`` and
``maximize`` off), in the order of ``torch.optim.adam._single_tensor_adam``: weight decay
(decoupled, ``θ ← θ(1 − γλ)``, for AdamW; added to the gradient for Adam), ``m ← m + (1 −
β₁)(g − m)``, ``v ← β₂v + (1 − β₂)g²``, ``t ← t + 1``, ``θ ← θ − γ/(1 − β₁ᵗ) · m /
(√v / √(1 − β₂ᵗ) + ε)``. PyTorch computes the bias corrections in double precision on the host;
here they are float32 ops of the step argument.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from shardwise.errors import ProgramError
from shardwise.importers.pytorch.capture import add_arg, lower
from shardwise.importers.pytorch.lowering import Lowering
from shardwise.ir.core import Module, Value, tensor_type
from shardwise.ir.types import TensorType
from shardwise.mesh import Mesh

#: The optimizer state of each parameter, as arguments named ``<parameter>.<state>``, and the
#: step count, one scalar argument for every parameter (PyTorch keeps one per parameter; they
#: are equal when every parameter has been updated at every step).
STATES = ("exp_avg", "exp_avg_sq")
STEP = "optimizer.step"


def _hyper(optimizer: Any, param: Any) -> dict[str, Any]:
    for group in optimizer.param_groups:
        if any(p is param for p in group["params"]):
            return group  # type: ignore[no-any-return]
    raise ProgramError("optimizer: a trainable parameter of the model is not in any of its param_groups")


def from_torch_step(
    model: Any,
    loss_fn: Callable[[Any, Any], Any],
    example_args: Sequence[Any],
    example_target: Any,
    optimizer: Any,
    *,
    mesh: Mesh | Mapping[str, int] | None = None,
    in_placements: Mapping[str, Sequence[Any]] | None = None,
) -> Module:
    """One training step of ``model`` as a shardwise ``Module`` (module docstring):
    ``@main(parameters..., buffers..., inputs..., target, <p>.exp_avg..., <p>.exp_avg_sq..., optimizer.step)
    -> (loss, new parameters..., new exp_avg..., new exp_avg_sq..., new step, new buffers...)``
    (the buffers the step mutates: batch norm's running statistics); ``loss_fn(output,
    target)`` gives a scalar. Argument names as :func:`shardwise.from_torch` gives them; a state
    argument without placements of its own gets its parameter's. The model is exported in
    training mode and left in the mode it had.

    Raises ``ProgramError`` for an optimizer other than ``torch.optim.Adam`` / ``AdamW`` or with
    ``amsgrad``, ``maximize`` or a tensor learning rate, and what :func:`shardwise.from_torch`
    raises; ``ImportError`` without torch."""
    import torch
    from torch.export.experimental import _export_forward_backward
    from torch.nn.attention import SDPBackend, sdpa_kernel

    if not isinstance(optimizer, torch.optim.Adam | torch.optim.AdamW):
        raise ProgramError(f"optimizer: expected torch.optim.Adam or AdamW, got {type(optimizer).__name__}")

    class _WithLoss(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, *args: Any) -> Any:
            return (loss_fn(self.model(*args[:-1]), args[-1]),)

    # The math kernel of scaled_dot_product_attention: the CPU flash kernel's backward is not
    # in core ATen, the math kernel's ops are.
    was_training = model.training
    try:
        with sdpa_kernel(SDPBackend.MATH):
            exported = torch.export.export(_WithLoss().train(), (*example_args, example_target))
            joint = _export_forward_backward(exported)
    finally:
        model.train(was_training)
    params = {n: p for n, p in model.named_parameters() if p.requires_grad}
    placements = dict(in_placements or {})
    extra = [f"{n}.{s}" for n in params for s in STATES] + [STEP]
    lo, outputs = lower(
        joint,
        mesh=mesh,
        in_placements=placements,
        outputs=("LOSS_OUTPUT", "GRADIENT_TO_PARAMETER", "USER_OUTPUT", "BUFFER_MUTATION"),
        extra_placements=extra,
        strip="model.",
        user_names=[*_forward_names(model, len(example_args)), "target"],
    )
    losses = [v for k, _t, v in outputs if k == "LOSS_OUTPUT"]
    grads = {t: v for k, t, v in outputs if k == "GRADIENT_TO_PARAMETER"}
    buffers = [(t, v) for k, t, v in outputs if k == "BUFFER_MUTATION"]
    f = lo.b.func
    arg_of = {a["jax.arg_info"].strip('"'): i for i, a in enumerate(f.arg_attrs)}
    states: dict[str, list[Value]] = {}
    for n, p in params.items():
        if n not in grads:
            raise ProgramError(f"from_torch_step: no gradient for parameter {n!r} in the joint graph")
        t = tensor_type(f.body.args[arg_of[n]])
        states[n] = [
            add_arg(lo, f"{n}.{s}", t.shape, t.element_type, placements.get(f"{n}.{s}", placements.get(n)))
            for s in STATES
        ]
    step = add_arg(lo, STEP, (), "f32", placements.get(STEP))
    new_step = lo.b.add(step, lo.const(1.0, "f32"))
    new: dict[str, list[Value]] = {}
    for n, p in params.items():
        group = _hyper(optimizer, p)
        if group.get("amsgrad") or group.get("maximize") or isinstance(group["lr"], torch.Tensor):
            raise ProgramError(f"optimizer group of {n!r}: expected amsgrad=False, maximize=False and a float lr")
        decoupled = bool(group.get("decoupled_weight_decay", isinstance(optimizer, torch.optim.AdamW)))
        new[n] = _adam(lo, f.body.args[arg_of[n]], grads[n], states[n], new_step, group, decoupled)
    results = [
        *losses,
        *(new[n][0] for n in params),
        *(new[n][1] for n in params),
        *(new[n][2] for n in params),
        new_step,
        *(v for _t, v in buffers),
    ]
    module = lo.b.ret(*results)
    # Each parameter, state and mutated buffer argument carries to its next value
    # (tf.aliasing_output), in the order of the results after the loss.
    index = {a["jax.arg_info"].strip('"'): i for i, a in enumerate(f.arg_attrs)}
    carried = [
        *(index[n] for n in params),
        *(index[f"{n}.{STATES[0]}"] for n in params),
        *(index[f"{n}.{STATES[1]}"] for n in params),
        index[STEP],
        *(index[str(t)] for t, _v in buffers),
    ]
    for result, arg in enumerate(carried, start=len(losses)):
        f.arg_attrs[arg]["tf.aliasing_output"] = f"{result} : i32"
    return module


def _forward_names(model: Any, n: int) -> list[str]:
    """The names of ``model.forward``'s first ``n`` parameters (``input``, ``src``, ...)."""
    import inspect

    names = [p.name for p in inspect.signature(model.forward).parameters.values() if p.kind != p.VAR_KEYWORD]
    return names[:n] if len(names) >= n else names + [f"arg{i}" for i in range(len(names), n)]


def _adam(
    lo: Lowering, p: Value, g: Value, state: list[Value], step: Value, group: Mapping[str, Any], decoupled: bool
) -> list[Value]:
    t = tensor_type(p)
    e, shape = t.element_type, t.shape
    lr, (b1, b2), eps, wd = float(group["lr"]), group["betas"], float(group["eps"]), float(group["weight_decay"])
    b = lo.b

    def c(x: float) -> Value:
        return lo.const(x, e, shape)

    g = lo.convert(g, e)
    if wd != 0.0:
        if decoupled:
            p = b.multiply(p, c(1.0 - lr * wd))
        else:
            g = b.add(g, b.multiply(p, c(wd)))
    m, v = state
    m = b.add(m, b.multiply(b.subtract(g, m), c(1.0 - float(b1))))
    v = b.add(b.multiply(v, c(float(b2))), b.multiply(b.multiply(g, g), c(1.0 - float(b2))))
    scalar = TensorType((), "f32")

    def correction(beta: float) -> Value:
        # 1 - beta ** step, a scalar
        power = b.op("stablehlo.power", [lo.const(float(beta), "f32"), step], [scalar]).result
        return b.subtract(lo.const(1.0, "f32"), power)

    step_size = lo.broadcast(lo.convert(b.divide(lo.const(lr, "f32"), correction(float(b1))), e), shape)
    root2 = lo.broadcast(lo.convert(b.op("stablehlo.sqrt", [correction(float(b2))], [scalar]).result, e), shape)
    denom = b.add(b.divide(b.op("stablehlo.sqrt", [v], [t]).result, root2), c(eps))
    p = b.subtract(p, b.multiply(step_size, b.divide(m, denom)))
    return [p, m, v]
