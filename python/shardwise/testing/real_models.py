"""Real training steps written with flax (``flax.linen``) and optax, lowered at test time.

Each model's step (``value_and_grad`` of the loss, the optimizer's update, ``apply_updates``) is
lowered with ``jax.jit(step, in_shardings=..., out_shardings=...).lower(...).as_text()`` exactly as
a user would get it: the text keeps its ``func.call``s (``call @relu`` ...). The mesh is 2x4 with
Auto axes ``("data", "model")``; inputs are batch-sharded on ``data`` and parameters Megatron-style
on ``model`` (first matmul of an MLP / the QKV projections column-split, the second matmul / the
output projection row-split, embeddings split on the vocab or feature dim). Every optimizer-state
leaf shaped like its parameter gets the parameter's sharding; the rest (step counts, factored
second moments) is replicated. Nothing is materialized: shapes come from ``jax.eval_shape``.

Needs 8 devices: ``XLA_FLAGS=--xla_force_host_platform_device_count=8`` before importing jax
(``conftest.py`` sets it)."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: (regex over the "/"-joined parameter path, partition spec as a tuple of axis names or None).
Rules = Sequence[tuple[str, tuple[str | None, ...]]]
#: One batch input: (shape, dtype name, partition spec).
Input = tuple[tuple[int, ...], str, tuple[str | None, ...]]


@dataclass(frozen=True)
class RealModel:
    """One lowered training step: the model's name, its optax optimizer and the raw MLIR text."""

    name: str
    optimizer: str
    text: str


@dataclass(frozen=True)
class _Spec:
    """What ``_lower`` needs of a model: its init/loss, parameter rules, optimizer and inputs."""

    optimizer: str
    make_opt: Callable[[], Any]
    module: Any  # a flax.linen.Module
    inputs: Sequence[Input]  # the first ``n_model_inputs`` go to ``module.init``
    loss: Callable[..., Any]  # (params, extra, *inputs) -> (loss, new_extra)
    rules: Rules
    extra_rules: Rules = ()  # for non-trained collections (batch_stats)
    extra: str | None = None  # the mutable collection's name, if any
    n_model_inputs: int = 1
    out_shardings: bool = True


@functools.cache
def _mesh() -> Any:
    import jax
    from jax.sharding import AxisType

    return jax.make_mesh((2, 4), ("data", "model"), axis_types=(AxisType.Auto,) * 2)


def _named(spec: tuple[str | None, ...]) -> Any:
    from jax.sharding import NamedSharding, PartitionSpec

    pspec: Any = PartitionSpec
    return NamedSharding(_mesh(), pspec(*spec))


def _optax() -> Any:
    import optax  # type: ignore[import-untyped]

    return optax


def _key_name(k: Any) -> str:
    for attr in ("key", "name", "idx"):
        if hasattr(k, attr):
            return str(getattr(k, attr))
    return str(k)


def _path(path: Sequence[Any]) -> tuple[str, ...]:
    return tuple(_key_name(k) for k in path)


def _param_specs(tree: Any, rules: Rules) -> Any:
    """The sharding of every leaf of ``tree``: the first rule matching its path, else replicated.
    A rule that matches no leaf, or gives a spec of the wrong rank, is an error."""
    import jax

    used: set[str] = set()

    def one(path: Sequence[Any], leaf: Any) -> Any:
        name = "/".join(_path(path))
        for pattern, spec in rules:
            if re.search(pattern, name):
                if len(spec) != len(leaf.shape):
                    raise ValueError(f"rule {pattern!r} gives {spec} to {name} of shape {leaf.shape}")
                used.add(pattern)
                return _named(spec)
        return _named(())

    out = jax.tree_util.tree_map_with_path(one, tree)
    unused = [pattern for pattern, _ in rules if pattern not in used]
    if unused:
        raise ValueError(f"rules {unused} match no parameter")
    return out


def _state_specs(state: Any, params: Any, pspecs: Any) -> Any:
    """Optimizer state: a leaf whose path ends with a parameter's path and of the same shape gets
    that parameter's sharding; everything else is replicated."""
    import jax

    by_path: dict[tuple[str, ...], tuple[tuple[int, ...], Any]] = {}
    flat_p = jax.tree_util.tree_flatten_with_path(params)[0]
    flat_s = jax.tree_util.tree_leaves(pspecs)
    for (path, leaf), spec in zip(flat_p, flat_s, strict=True):
        by_path[_path(path)] = (tuple(leaf.shape), spec)

    def one(path: Sequence[Any], leaf: Any) -> Any:
        names = _path(path)
        for i in range(len(names)):
            hit = by_path.get(names[i:])
            if hit is not None and hit[0] == tuple(leaf.shape):
                return hit[1]
        return _named(())

    return jax.tree_util.tree_map_with_path(one, state)


@dataclass(frozen=True)
class _Traced:
    """What lowering a step needs: the batch's abstract inputs, the abstract parameters,
    extra collection and optimizer state, their hand-rule specs, and the step function."""

    sds: list[Any]
    params: Any
    extra: Any
    opt_state: Any
    pspecs: Any
    especs: Any
    sspecs: Any
    step: Callable[..., Any]


def _trace(spec: _Spec) -> _Traced:
    """Abstract state (``jax.eval_shape``) and the training step of ``spec``."""
    import jax
    import jax.numpy as jnp

    optax = _optax()

    struct: Any = jax.ShapeDtypeStruct
    sds = [struct(shape, jnp.dtype(dt)) for shape, dt, _ in spec.inputs]
    variables = jax.eval_shape(spec.module.init, jax.random.PRNGKey(0), *sds[: spec.n_model_inputs])
    params = variables["params"]
    extra = variables[spec.extra] if spec.extra else {}
    opt = spec.make_opt()
    opt_state = jax.eval_shape(opt.init, params)
    pspecs = _param_specs(params, spec.rules)

    def step(params: Any, extra: Any, opt_state: Any, *batch: Any) -> Any:
        (loss, new_extra), grads = jax.value_and_grad(spec.loss, has_aux=True)(params, extra, *batch)
        updates, opt_state = opt.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), new_extra, opt_state, loss

    return _Traced(
        sds,
        params,
        extra,
        opt_state,
        pspecs,
        _param_specs(extra, spec.extra_rules),
        _state_specs(opt_state, params, pspecs),
        step,
    )


def _lower(spec: _Spec) -> str:
    """Lower one training step of ``spec`` on the mesh and return the raw MLIR text."""
    import jax

    t = _trace(spec)
    in_sh = (t.pspecs, t.especs, t.sspecs, *(_named(s) for _, _, s in spec.inputs))
    out_sh = (in_sh[0], in_sh[1], in_sh[2], _named(())) if spec.out_shardings else None
    jitted = jax.jit(t.step, in_shardings=in_sh, out_shardings=out_sh)
    return str(jitted.lower(t.params, t.extra, t.opt_state, *t.sds).as_text())


def _plain(module: Any, objective: Callable[[Any, Any], Any]) -> Callable[..., Any]:
    """A loss ``objective(module.apply(params, x), target)`` with no mutable collection."""

    def loss(params: Any, extra: Any, x: Any, y: Any) -> Any:
        return objective(_apply(module, {"params": params}, x), y), extra

    return loss


def _apply(module: Any, variables: dict[str, Any], *args: Any, **kwargs: Any) -> Any:
    """``module.apply`` (typed ``Any``: flax's return type is a union)."""
    return module.apply(variables, *args, **kwargs)


def _xent(logits: Any, labels: Any) -> Any:
    optax = _optax()

    return optax.softmax_cross_entropy_with_integer_labels(logits, labels).mean()


def _mse(pred: Any, target: Any) -> Any:
    import jax.numpy as jnp

    return jnp.mean(jnp.square(pred - target))


# ---------------------------------------------------------------------------------------------
# The models: one function each, returning its _Spec.

M, D = "model", "data"


def _mlp() -> _Spec:
    """MLP classifier: Dense+relu twice, integer-label softmax cross-entropy; adam."""
    import flax.linen as nn

    optax = _optax()

    class MLP(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.relu(nn.Dense(64, name="up")(x))
            x = nn.relu(nn.Dense(32, name="down")(x))
            return nn.Dense(10, name="head")(x)

    m = MLP()
    rules = [("up/kernel", (None, M)), ("up/bias", (M,)), ("down/kernel", (M, None))]
    inputs = [((16, 32), "float32", (D, None)), ((16,), "int32", (D,))]
    return _Spec("adam", lambda: optax.adam(1e-3), m, inputs, _plain(m, _xent), rules)


def _cnn_bn() -> _Spec:
    """CNN with BatchNorm (batch statistics, mutable batch_stats), max/avg pooling; sgd+momentum."""
    import flax.linen as nn

    optax = _optax()

    class CNN(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.Conv(16, (3, 3), name="conv1")(x)
            x = nn.relu(nn.BatchNorm(use_running_average=False, name="bn1")(x))
            x = nn.max_pool(x, (2, 2), strides=(2, 2))
            x = nn.Conv(16, (3, 3), name="conv2")(x)
            x = nn.relu(nn.BatchNorm(use_running_average=False, name="bn2")(x))
            x = nn.avg_pool(x, (2, 2), strides=(2, 2))
            return nn.Dense(10, name="head")(x.reshape(x.shape[0], -1))

    m = CNN()

    def loss(params: Any, stats: Any, x: Any, y: Any) -> Any:
        logits, new = _apply(m, {"params": params, "batch_stats": stats}, x, mutable=["batch_stats"])
        return _xent(logits, y), new["batch_stats"]

    rules = [
        ("conv1/kernel", (None, None, None, M)),
        ("conv1/bias", (M,)),
        ("bn1/", (M,)),
        ("conv2/kernel", (None, None, M, None)),
    ]
    inputs = [((8, 16, 16, 3), "float32", (D, None, None, None)), ((8,), "int32", (D,))]
    opt = lambda: optax.sgd(0.1, momentum=0.9)
    return _Spec("sgd_momentum", opt, m, inputs, loss, rules, extra_rules=[("bn1/", (M,))], extra="batch_stats")


#: Megatron rules for ``_block``: flax attention's query/key/value column-split by head, its
#: output projection row-split; the MLP's ``mlp_in`` column-split, ``mlp_out`` row-split.
_BLOCK_RULES: Rules = (
    (r"(query|key|value)/kernel", (None, M, None)),
    (r"(query|key|value)/bias", (M, None)),
    (r"attn/out/kernel", (M, None, None)),
    (r"mlp_in/kernel", (None, M)),
    (r"mlp_in/bias", (M,)),
    (r"mlp_out/kernel", (M, None)),
)


def _block(x: Any, mask: Any, heads: int, name: str) -> Any:
    """Pre-LayerNorm transformer block (self-attention, gelu MLP), called inside a compact module."""
    import flax.linen as nn

    d = x.shape[-1]
    h = nn.LayerNorm(name=f"{name}_ln1")(x)
    x = x + nn.MultiHeadDotProductAttention(num_heads=heads, name=f"{name}_attn", deterministic=True)(h, h, mask=mask)
    h = nn.LayerNorm(name=f"{name}_ln2")(x)
    h = nn.gelu(nn.Dense(4 * d, name=f"{name}_mlp_in")(h))
    h = nn.Dropout(0.1, deterministic=True)(h)
    return x + nn.Dense(d, name=f"{name}_mlp_out")(h)


def _gpt(layers: int = 2) -> _Spec:
    """GPT-style decoder LM: token+position embeddings, ``layers`` causal blocks (2), tied LM
    head, next-token loss; chain(clip_by_global_norm, adamw)."""
    import flax.linen as nn

    optax = _optax()

    vocab, d, seq = 64, 32, 8

    class GPT(nn.Module):
        @nn.compact
        def __call__(self, tokens: Any) -> Any:
            embed = nn.Embed(vocab, d, name="tok")
            pos = self.param("pos", nn.initializers.normal(0.02), (seq, d))
            x = embed(tokens) + pos[None]
            mask = nn.make_causal_mask(tokens)
            for i in range(layers):
                x = _block(x, mask, 4, f"b{i}")
            return embed.attend(nn.LayerNorm(name="ln_f")(x))

    m = GPT()

    def loss(params: Any, extra: Any, tokens: Any) -> Any:
        logits = _apply(m, {"params": params}, tokens)
        return _xent(logits[:, :-1], tokens[:, 1:]), extra

    rules = [("tok/embedding", (M, None)), ("^pos$", (None, M)), *_BLOCK_RULES]
    inputs = [((8, seq), "int32", (D, None))]

    def opt() -> Any:
        return optax.chain(optax.clip_by_global_norm(1.0), optax.adamw(3e-4, weight_decay=0.1))

    return _Spec("clip+adamw", opt, m, inputs, loss, rules)


def _moe() -> _Spec:
    """Top-2 mixture-of-experts layer: router Dense, lax.top_k, softmax gates, stacked expert
    weights (expert-parallel on ``model``) with einsum dispatch, load-balancing loss; lion."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    optax = _optax()

    experts, d, hidden = 4, 32, 64

    class MoE(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            logits = nn.Dense(experts, use_bias=False, name="router")(x)  # (b, s, e)
            top, idx = jax.lax.top_k(logits, 2)
            gates = jax.nn.softmax(top, axis=-1)  # (b, s, 2)
            combine = jnp.einsum("bsk,bske->bse", gates, jax.nn.one_hot(idx, experts))
            w1 = self.param("w1", nn.initializers.lecun_normal(), (experts, d, hidden))
            w2 = self.param("w2", nn.initializers.lecun_normal(), (experts, hidden, d))
            h = jax.nn.gelu(jnp.einsum("bsd,edh->bseh", x, w1))
            y = jnp.einsum("bseh,ehd,bse->bsd", h, w2, combine)
            balance = jnp.mean(jax.nn.softmax(logits, axis=-1), axis=(0, 1)) * jnp.mean(combine > 0, axis=(0, 1))
            return x + y, experts * jnp.sum(balance)

    m = MoE()

    def loss(params: Any, extra: Any, x: Any, y: Any) -> Any:
        out, aux = _apply(m, {"params": params}, x)
        return _mse(out, y) + 0.01 * aux, extra

    rules = [("^w1$", (M, None, None)), ("^w2$", (M, None, None))]
    inputs = [((8, 8, d), "float32", (D, None, None)), ((8, 8, d), "float32", (D, None, None))]
    return _Spec("lion", lambda: optax.lion(1e-4), m, inputs, loss, rules)


def _scan_mlp() -> _Spec:
    """nn.scan over 4 identical residual LayerNorm+MLP blocks (stacked params); rmsprop."""
    import flax.linen as nn

    optax = _optax()

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x: Any, _: Any) -> Any:
            h = nn.gelu(nn.Dense(64, name="mlp_in")(nn.LayerNorm(name="ln")(x)))
            return x + nn.Dense(x.shape[-1], name="mlp_out")(h), None

    class Stack(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            scan = nn.scan(Block, variable_axes={"params": 0}, split_rngs={"params": True}, length=4)
            x, _ = scan(name="layers")(nn.Dense(32, name="embed")(x), None)
            return nn.Dense(1, name="head")(x)

    m = Stack()
    rules = [("mlp_in/kernel", (None, None, M)), ("mlp_in/bias", (None, M)), ("mlp_out/kernel", (None, M, None))]
    inputs = [((16, 16), "float32", (D, None)), ((16, 1), "float32", (D, None))]
    return _Spec("rmsprop", lambda: optax.rmsprop(1e-3, momentum=0.9), m, inputs, _plain(m, _mse), rules)


def _lstm() -> _Spec:
    """LSTM (nn.RNN over nn.LSTMCell) sequence regression on the last step; adagrad."""
    import flax.linen as nn

    optax = _optax()

    class LSTM(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            h: Any = nn.RNN(nn.LSTMCell(32))(x)
            return nn.Dense(1, name="head")(h[:, -1])

    m = LSTM()
    rules = [(r"LSTMCell_0/[ih]./kernel", (None, M)), (r"LSTMCell_0/h./bias", (M,))]
    inputs = [((8, 8, 16), "float32", (D, None, None)), ((8, 1), "float32", (D, None))]
    return _Spec("adagrad", lambda: optax.adagrad(1e-2), m, inputs, _plain(m, _mse), rules)


def _vae() -> _Spec:
    """VAE: encoder to mean/log-variance, reparameterization with a passed-in PRNG key, decoder,
    reconstruction + KL loss; adam."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    optax = _optax()

    latent = 8

    class VAE(nn.Module):
        @nn.compact
        def __call__(self, x: Any, key: Any) -> Any:
            h = nn.relu(nn.Dense(64, name="enc")(x))
            stats = nn.Dense(2 * latent, name="enc_out")(h)
            mean, logvar = stats[:, :latent], stats[:, latent:]
            z = mean + jnp.exp(0.5 * logvar) * jax.random.normal(key, mean.shape)
            h = nn.relu(nn.Dense(64, name="dec")(z))
            return nn.Dense(x.shape[-1], name="dec_out")(h), mean, logvar

    m = VAE()

    def loss(params: Any, extra: Any, x: Any, key: Any) -> Any:
        recon, mean, logvar = _apply(m, {"params": params}, x, key)
        kl = -0.5 * jnp.mean(jnp.sum(1 + logvar - jnp.square(mean) - jnp.exp(logvar), axis=-1))
        return _mse(recon, x) + kl, extra

    rules = [
        ("(enc|dec)/kernel", (None, M)),
        ("(enc|dec)/bias", (M,)),
        ("(enc|dec)_out/kernel", (M, None)),
    ]
    inputs = [((16, 32), "float32", (D, None)), ((2,), "uint32", (None,))]
    return _Spec("adam", lambda: optax.adam(1e-3), m, inputs, loss, rules, n_model_inputs=2, out_shardings=False)


def _bert() -> _Spec:
    """BERT-style encoder classifier: embeddings, a bidirectional block with a padding mask,
    mean pool, Dense head; adafactor (factored for dims >= 16)."""
    import flax.linen as nn
    import jax.numpy as jnp

    optax = _optax()

    vocab, d = 64, 32

    class BERT(nn.Module):
        @nn.compact
        def __call__(self, tokens: Any) -> Any:
            positions = jnp.arange(tokens.shape[1])
            x = nn.Embed(vocab, d, name="tok")(tokens) + nn.Embed(tokens.shape[1], d, name="pos")(positions)
            x = nn.LayerNorm(name="ln_emb")(x)
            keep = tokens != 0
            x = _block(x, nn.make_attention_mask(keep, keep), 4, "b0")
            pooled = jnp.sum(x * keep[..., None], axis=1) / jnp.maximum(jnp.sum(keep, axis=1, keepdims=True), 1)
            return nn.Dense(4, name="cls")(pooled)

    m = BERT()
    rules = [("tok/embedding", (None, M)), ("pos/embedding", (None, M)), *_BLOCK_RULES]
    inputs = [((8, 8), "int32", (D, None)), ((8,), "int32", (D,))]

    def opt() -> Any:
        return optax.adafactor(1e-3, min_dim_size_to_factor=16)

    return _Spec("adafactor", opt, m, inputs, _plain(m, _xent), rules)


def _resnet_gn() -> _Spec:
    """ResNet-style net: conv stem, 2 residual blocks with GroupNorm and skip connections, global
    average pool, Dense head; adamw."""
    import flax.linen as nn

    optax = _optax()

    class Block(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            c = x.shape[-1]
            h = nn.relu(nn.GroupNorm(num_groups=4, name="gn1")(nn.Conv(c, (3, 3), use_bias=False, name="conv1")(x)))
            h = nn.GroupNorm(num_groups=4, name="gn2")(nn.Conv(c, (3, 3), use_bias=False, name="conv2")(h))
            return nn.relu(x + h)

    class ResNet(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = nn.relu(nn.Conv(16, (3, 3), name="stem")(x))
            for i in range(2):
                x = Block(name=f"block{i}")(x)
            return nn.Dense(10, name="head")(x.mean(axis=(1, 2)))

    m = ResNet()
    rules = [("conv1/kernel", (None, None, None, M)), ("gn1/", (M,)), ("conv2/kernel", (None, None, M, None))]
    inputs = [((8, 8, 8, 3), "float32", (D, None, None, None)), ((8,), "int32", (D,))]
    return _Spec("adamw", lambda: optax.adamw(1e-3), m, inputs, _plain(m, _xent), rules)


def _bow() -> _Spec:
    """Bag-of-words text classifier: embedding lookup with jnp.take, padding masked with
    jnp.where, mean, Dense, log_softmax negative log-likelihood; lamb."""
    import flax.linen as nn
    import jax
    import jax.numpy as jnp

    optax = _optax()

    vocab, d = 128, 32

    class BoW(nn.Module):
        @nn.compact
        def __call__(self, tokens: Any) -> Any:
            table = self.param("embedding", nn.initializers.normal(0.1), (vocab, d))
            e = jnp.take(table, tokens, axis=0)
            e = jnp.where((tokens > 0)[..., None], e, 0.0)
            bag = e.sum(axis=1) / jnp.maximum((tokens > 0).sum(axis=1, keepdims=True), 1)
            return jax.nn.log_softmax(nn.Dense(5, name="head")(nn.tanh(nn.Dense(64, name="hidden")(bag))))

    m = BoW()

    def nll(logp: Any, y: Any) -> Any:
        return -jnp.mean(jnp.take_along_axis(logp, y[:, None], axis=1))

    rules = [
        ("^embedding$", (M, None)),
        ("hidden/kernel", (None, M)),
        ("hidden/bias", (M,)),
        ("head/kernel", (M, None)),
    ]
    inputs = [((16, 8), "int32", (D, None)), ((16,), "int32", (D,))]
    return _Spec("lamb", lambda: optax.lamb(1e-3), m, inputs, _plain(m, nll), rules)


def _tcn() -> _Spec:
    """Temporal conv net: standardization with jnp.var, cumsum features, depthwise 1-D conv
    (feature_group_count), pointwise conv, regression; sgd with Nesterov momentum."""
    import flax.linen as nn
    import jax.numpy as jnp

    optax = _optax()

    class TCN(nn.Module):
        @nn.compact
        def __call__(self, x: Any) -> Any:
            x = (x - x.mean(axis=1, keepdims=True)) / jnp.sqrt(jnp.var(x, axis=1, keepdims=True) + 1e-5)
            x = jnp.concatenate([x, jnp.cumsum(x, axis=1) / x.shape[1]], axis=-1)  # (b, t, 2c)
            c = x.shape[-1]
            x = nn.Conv(c, (3,), feature_group_count=c, padding="CAUSAL", name="depthwise")(x)
            x = nn.swish(nn.Conv(32, (1,), name="pointwise")(x))
            return nn.Dense(1, name="head")(x[:, -1])

    m = TCN()
    rules = [("pointwise/kernel", (None, None, M)), ("pointwise/bias", (M,)), ("head/kernel", (M, None))]
    inputs = [((8, 8, 8), "float32", (D, None, None)), ((8, 1), "float32", (D, None))]
    opt = lambda: optax.sgd(1e-2, momentum=0.9, nesterov=True)
    return _Spec("sgd_nesterov", opt, m, inputs, _plain(m, _mse), rules)


_MODELS: dict[str, Callable[[], _Spec]] = {
    "mlp": _mlp,
    "cnn_batchnorm": _cnn_bn,
    "gpt": _gpt,
    "moe_top2": _moe,
    "scan_mlp": _scan_mlp,
    "lstm": _lstm,
    "vae": _vae,
    "bert": _bert,
    "resnet_groupnorm": _resnet_gn,
    "bow_text": _bow,
    "tcn_depthwise": _tcn,
}


def model_names() -> list[str]:
    """The names of all models, without lowering anything (pytest parametrize ids)."""
    return list(_MODELS)


@functools.cache
def real_model(name: str) -> RealModel:
    """The model ``name``, lowered (once)."""
    spec = _MODELS[name]()
    return RealModel(name, spec.optimizer, _lower(spec))


@functools.cache
def real_models() -> list[RealModel]:
    """All models, lowered (once each)."""
    return [real_model(n) for n in _MODELS]


# ---------------------------------------------------------------------------------------------
# Un-annotated steps for the search (issue 26): no mesh, no shardings, and what each argument is.


@dataclass(frozen=True)
class ArgInfo:
    """One argument of an un-annotated step, in ``main``'s order: ``kind`` (``param``,
    ``extra`` for a non-trained collection such as batch_stats, ``state`` for optimizer state,
    ``input`` for a batch input), its ``/``-joined pytree ``path``, ``shape`` and the partition
    spec the model's hand rules give it (``megatron``; the parameter's for a state leaf
    mirroring a parameter; the batch spec for an input; ``()`` for replicated)."""

    kind: str
    path: str
    shape: tuple[int, ...]
    megatron: tuple[str | None, ...]


@dataclass(frozen=True)
class PlainModel:
    """One training step lowered without shardings (``jax.jit(step, donate_argnums=(0, 1,
    2)).lower(...)``, calls kept) and its arguments."""

    name: str
    optimizer: str
    text: str
    args: tuple[ArgInfo, ...]


def _spec_of(sharding: Any) -> tuple[str | None, ...]:
    spec = tuple(sharding.spec)
    return spec if any(s is not None for s in spec) else ()


@functools.cache
def plain_model(name: str) -> PlainModel:
    """The model ``name``'s step lowered un-annotated (once), with its argument roles."""
    return _plain_model(name, _MODELS[name]())


@functools.cache
def deep_gpt(layers: int) -> PlainModel:
    """The GPT step with ``layers`` blocks, lowered un-annotated (the search's size benchmark:
    about 1,400 ops per block once calls are inlined)."""
    return _plain_model(f"gpt{layers}", _gpt(layers))


def _plain_model(name: str, spec: _Spec) -> PlainModel:
    import jax

    t = _trace(spec)
    args: list[ArgInfo] = []
    for kind, tree, specs in (
        ("param", t.params, t.pspecs),
        ("extra", t.extra, t.especs),
        ("state", t.opt_state, t.sspecs),
    ):
        flat = jax.tree_util.tree_flatten_with_path(tree)[0]
        for (path, leaf), sh in zip(flat, jax.tree_util.tree_leaves(specs), strict=True):
            args.append(ArgInfo(kind, "/".join(_path(path)), tuple(leaf.shape), _spec_of(sh)))
    for shape, _, batch_spec in spec.inputs:
        args.append(ArgInfo("input", "batch", tuple(shape), batch_spec if any(batch_spec) else ()))
    # Donated as training loops do: the updated state is the next step's input
    # (tf.aliasing_output, which auto_shard reads as loop-carried pairs).
    # keep_unused: every argument stays in main (default jit drops unused ones, which would
    # shift the positions ``args`` describes).
    text = str(
        jax.jit(t.step, donate_argnums=(0, 1, 2), keep_unused=True)
        .lower(t.params, t.extra, t.opt_state, *t.sds)
        .as_text()
    )
    return PlainModel(name, spec.optimizer, text, tuple(args))
