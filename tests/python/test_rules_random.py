"""``shardwise.rules`` against Shardy on seeded random ops whose rules are algorithms rather
than tables: reshapes (compound factors), convolutions (groups, layouts, window sizes versus
window counts), reduce_window and select_and_scatter (windows, strides, padding), dot_general,
broadcast_in_dim, transpose, pad and slice, in the default and the conservative mode."""

from __future__ import annotations

import math
import random

import pytest
from test_rules_mlir import compare_module

pytestmark = pytest.mark.jax

SEED = 20240611


def _t(shape: list[int], elt: str = "f32") -> str:
    return "tensor<" + "".join(f"{d}x" for d in shape) + elt + ">"


def _arr(values: list[int]) -> str:
    return "array<i64" + (": " + ", ".join(map(str, values)) if values else "") + ">"


def _split(n: int, rng: random.Random, max_rank: int) -> list[int]:
    """A random shape with ``n`` elements (size-1 dimensions sprinkled in)."""
    primes, m, p = [], n, 2
    while m > 1:
        while m % p == 0:
            primes.append(p)
            m //= p
        p += 1
    rng.shuffle(primes)
    rank = rng.randint(1, max_rank)
    dims = [1] * rank
    for q in primes:
        dims[rng.randrange(rank)] *= q
    if rng.random() < 0.3:
        dims.insert(rng.randrange(len(dims) + 1), 1)
    return dims


class _Module:
    def __init__(self) -> None:
        self.funcs: list[str] = []

    def add(self, args: list[str], body: str, results: list[str]) -> None:
        i = len(self.funcs)
        params = ", ".join(f"%a{k}: {t}" for k, t in enumerate(args))
        self.funcs.append(f"func.func @f{i}({params}) -> ({', '.join(results)}) {{\n{body}\n}}")

    def text(self) -> str:
        return "\n".join(self.funcs)


def _reshapes(rng: random.Random, m: _Module, count: int) -> None:
    sizes = [6, 8, 12, 16, 24, 30, 36, 48, 60, 64, 72, 90, 96, 120, 128, 180, 210, 256, 360, 384, 1024]
    for _ in range(count):
        n = rng.choice(sizes)
        a, b = _split(n, rng, 4), _split(n, rng, 4)
        m.add([_t(a)], f'  %0 = "stablehlo.reshape"(%a0) : ({_t(a)}) -> {_t(b)}\n  return %0 : {_t(b)}', [_t(b)])


def _convolutions(rng: random.Random, m: _Module, count: int) -> None:
    for _ in range(count):
        nsp = rng.randint(1, 3)
        fgc = rng.choice([1, 1, 2, 3, 4])
        bgc = 1 if fgc > 1 else rng.choice([1, 1, 2, 4])
        batch = bgc * rng.randint(1, 3)
        in_feat = fgc * rng.randint(1, 3)
        out_feat = fgc * bgc * rng.randint(1, 3)
        window = [rng.randint(1, 5) for _ in range(nsp)]
        strides = [rng.randint(1, 3) for _ in range(nsp)]
        spatial_in = [w + rng.randint(0, 9) for w in window]
        spatial_out = [(i - w) // s + 1 for i, w, s in zip(spatial_in, window, strides)]
        # Random layouts: position of each logical dimension.
        lhs_order, rhs_order, out_order = (rng.sample(range(nsp + 2), nsp + 2) for _ in range(3))

        def layout(order: list[int], a: str, b: str, sizes: dict[str, int]) -> tuple[str, list[int]]:
            names = [a, b] + [str(k) for k in range(nsp)]
            placed = [""] * (nsp + 2)
            for name, pos in zip(names, order):
                placed[pos] = name
            return "[" + ", ".join(placed) + "]", [sizes[x] for x in placed]

        lhs_s, lhs = layout(
            lhs_order, "b", "f", {"b": batch, "f": in_feat, **{str(k): spatial_in[k] for k in range(nsp)}}
        )
        rhs_s, rhs = layout(
            rhs_order, "i", "o", {"i": in_feat // fgc, "o": out_feat, **{str(k): window[k] for k in range(nsp)}}
        )
        out_s, out = layout(
            out_order, "b", "f", {"b": batch // bgc, "f": out_feat, **{str(k): spatial_out[k] for k in range(nsp)}}
        )
        attrs = (
            f"dimension_numbers = #stablehlo.conv<{lhs_s}x{rhs_s}->{out_s}>, feature_group_count = {fgc} : i64, "
            f"batch_group_count = {bgc} : i64, window_strides = {_arr(strides)}"
        )
        m.add(
            [_t(lhs), _t(rhs)],
            f'  %0 = "stablehlo.convolution"(%a0, %a1) {{{attrs}}} : ({_t(lhs)}, {_t(rhs)}) -> {_t(out)}\n  return %0 : {_t(out)}',
            [_t(out)],
        )


def _windows(rng: random.Random, m: _Module, count: int) -> None:
    for k in range(count):
        rank = rng.randint(1, 4)
        shape = [rng.randint(1, 9) for _ in range(rank)]
        window = [rng.choice([1, 1, 2, 3]) for _ in range(rank)]
        strides = [rng.choice([1, 1, 2]) for _ in range(rank)]
        pad = [[rng.choice([0, 0, 1]), rng.choice([0, 0, 2])] for _ in range(rank)]
        shape = [max(s, w) for s, w in zip(shape, window)]
        attrs = [f"window_dimensions = {_arr(window)}"]
        if rng.random() < 0.8:
            attrs.append(f"window_strides = {_arr(strides)}")
        else:
            strides = [1] * rank
        if rng.random() < 0.7:
            pads = "dense<[" + ", ".join(f"[{lo}, {hi}]" for lo, hi in pad) + f"]> : tensor<{rank}x2xi64>"
            attrs.append(f"padding = {pads}")
        else:
            pad = [[0, 0] for _ in range(rank)]
        out = [(s + lo + hi - w) // st + 1 for s, w, st, (lo, hi) in zip(shape, window, strides, pad)]
        body = (
            f"  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f'  %0 = "stablehlo.reduce_window"(%a0, %c) <{{{", ".join(attrs)}}}> ({{\n'
            f"  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    %s = stablehlo.add %x, %y : tensor<f32>\n"
            f"    stablehlo.return %s : tensor<f32>\n  }}) : ({_t(shape)}, tensor<f32>) -> {_t(out)}\n"
            f"  return %0 : {_t(out)}"
        )
        m.add([_t(shape)], body, [_t(out)])
        if k % 2 == 0 and all(o > 0 for o in out):
            sattrs = ", ".join(a for a in attrs)
            body = (
                f"  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
                f'  %0 = "stablehlo.select_and_scatter"(%a0, %a1, %c) <{{{sattrs}}}> ({{\n'
                f"  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    %s = stablehlo.compare GE, %x, %y : (tensor<f32>, tensor<f32>) -> tensor<i1>\n"
                f"    stablehlo.return %s : tensor<i1>\n  }}, {{\n"
                f"  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n    %s = stablehlo.add %x, %y : tensor<f32>\n"
                f"    stablehlo.return %s : tensor<f32>\n  }}) : ({_t(shape)}, {_t(out)}, tensor<f32>) -> {_t(shape)}\n"
                f"  return %0 : {_t(shape)}"
            )
            m.add([_t(shape), _t(out)], body, [_t(shape)])


def _structural(rng: random.Random, m: _Module, count: int) -> None:
    for _ in range(count):
        # dot_general with random batching / contracting dimensions.
        nb, nc, nl, nr = rng.randint(0, 2), rng.randint(0, 2), rng.randint(0, 2), rng.randint(0, 2)
        sizes = [rng.randint(1, 6) for _ in range(nb + nc + nl + nr)]
        lhs_roles = ["b"] * nb + ["c"] * nc + ["l"] * nl
        rhs_roles = ["b"] * nb + ["c"] * nc + ["r"] * nr
        rng.shuffle(lhs_roles)
        rng.shuffle(rhs_roles)
        bsz, csz, lsz, rsz = sizes[:nb], sizes[nb : nb + nc], sizes[nb + nc : nb + nc + nl], sizes[nb + nc + nl :]

        def place(roles: list[str], other: list[int]) -> tuple[list[int], list[int], list[int]]:
            shape, bd, cd, it = [], [], [], {"b": iter(bsz), "c": iter(csz), "x": iter(other)}
            for pos, r in enumerate(roles):
                key = r if r in "bc" else "x"
                shape.append(next(it[key]))
                (bd if r == "b" else cd if r == "c" else []).append(pos)
            return shape, bd, cd

        lhs, lb, lc = place(lhs_roles, lsz)
        rhs, rb, rc = place(rhs_roles, rsz)
        out = bsz + lsz + rsz
        fields = []
        if nb:
            fields += [f"lhs_batching_dimensions = {lb}", f"rhs_batching_dimensions = {rb}"]
        if nc:
            fields += [f"lhs_contracting_dimensions = {lc}", f"rhs_contracting_dimensions = {rc}"]
        dot = "#stablehlo.dot<" + ", ".join(fields) + ">"
        m.add(
            [_t(lhs), _t(rhs)],
            f'  %0 = "stablehlo.dot_general"(%a0, %a1) {{dot_dimension_numbers = {dot}}} : ({_t(lhs)}, {_t(rhs)}) -> {_t(out)}\n'
            f"  return %0 : {_t(out)}",
            [_t(out)],
        )
        # broadcast_in_dim, transpose, pad, slice on a random shape.
        rank = rng.randint(1, 4)
        shape = [rng.choice([1, 1, 2, 3, 5, 8]) for _ in range(rank)]
        out_rank = rank + rng.randint(0, 2)
        dims = sorted(rng.sample(range(out_rank), rank))
        bout = [rng.choice([1, 4, 6]) for _ in range(out_rank)]
        for i, d in zip(range(rank), dims):
            if shape[i] != 1 or rng.random() < 0.5:
                bout[d] = shape[i]
        perm = rng.sample(range(rank), rank)
        tout = [shape[p] for p in perm]
        lo = [rng.choice([0, 1, -1]) if s > 1 else rng.choice([0, 1]) for s in shape]
        hi = [rng.choice([0, 2]) for _ in shape]
        interior = [rng.choice([0, 0, 1]) for _ in shape]
        pout = [s + a + b + max(s - 1, 0) * i for s, a, b, i in zip(shape, lo, hi, interior)]
        start = [rng.randint(0, s - 1) for s in shape]
        limit = [rng.randint(st + 1, s) for st, s in zip(start, shape)]
        step = [rng.choice([1, 1, 2]) for _ in shape]
        sout = [math.ceil((li - st) / sp) for st, li, sp in zip(start, limit, step)]
        body = (
            f'  %0 = "stablehlo.broadcast_in_dim"(%a0) {{broadcast_dimensions = {_arr(dims)}}} : ({_t(shape)}) -> {_t(bout)}\n'
            f'  %1 = "stablehlo.transpose"(%a0) {{permutation = {_arr(perm)}}} : ({_t(shape)}) -> {_t(tout)}\n'
            f"  %c = stablehlo.constant dense<0.0> : tensor<f32>\n"
            f'  %2 = "stablehlo.pad"(%a0, %c) {{edge_padding_low = {_arr(lo)}, edge_padding_high = {_arr(hi)}, '
            f"interior_padding = {_arr(interior)}}} : ({_t(shape)}, tensor<f32>) -> {_t(pout)}\n"
            f'  %3 = "stablehlo.slice"(%a0) {{start_indices = {_arr(start)}, limit_indices = {_arr(limit)}, '
            f"strides = {_arr(step)}}} : ({_t(shape)}) -> {_t(sout)}\n"
            f"  return %0, %1, %2, %3 : {_t(bout)}, {_t(tout)}, {_t(pout)}, {_t(sout)}"
        )
        m.add([_t(shape)], body, [_t(bout), _t(tout), _t(pout), _t(sout)])


def _indices(
    rng: random.Random, operand: list[int], batching: list[int], nidx: int
) -> tuple[list[int], int, list[int]]:
    """A start-indices shape: batch dimensions (those paired with the operand's batching
    dimensions first sized like them) and the index vector dimension; returns (shape,
    index_vector_dim, indices batching dims in the order of ``batching``)."""
    entries = [("b", k) for k in range(len(batching))] + [("x", 0)] * rng.randint(0, 2)
    rng.shuffle(entries)
    implicit = nidx == 1 and rng.random() < 0.3
    ivd = len(entries) if implicit else rng.randint(0, len(entries))
    shape, positions = [], {}
    for pos, (kind, k) in enumerate(entries):
        real = pos if pos < ivd else pos + 1
        if kind == "b":
            positions[k] = real
            shape.append(operand[batching[k]])
        else:
            shape.append(rng.randint(1, 4))
    if not implicit:
        shape.insert(ivd, nidx)
    return shape, ivd, [positions[k] for k in range(len(batching))]


def _gathers(rng: random.Random, count: int) -> list[tuple[list[str], str, list[str]]]:
    out = []
    for _ in range(count):
        r = rng.randint(1, 4)
        operand = [rng.randint(1, 6) for _ in range(r)]
        dims = list(range(r))
        batching = sorted(rng.sample(dims, rng.randint(0, min(2, r - 1))))
        free = [d for d in dims if d not in batching]
        collapsed = sorted(rng.sample(free, rng.randint(0, len(free))))
        index_map = rng.sample(free, rng.randint(1, len(free)))
        indices, ivd, ibatch = _indices(rng, operand, batching, len(index_map))
        sizes = [1 if d in collapsed or d in batching else rng.randint(1, operand[d]) for d in dims]
        window = [sizes[d] for d in dims if d not in collapsed and d not in batching]
        batch = [s for k, s in enumerate(indices) if k != ivd]
        rank = len(batch) + len(window)
        offset = sorted(rng.sample(range(rank), len(window)))
        res, bi, wi = [], iter(batch), iter(window)
        for k in range(rank):
            res.append(next(wi) if k in offset else next(bi))
        fields = [
            f"offset_dims = {offset}" if offset else "",
            f"collapsed_slice_dims = {collapsed}" if collapsed else "",
            f"operand_batching_dims = {batching}" if batching else "",
            f"start_indices_batching_dims = {ibatch}" if ibatch else "",
            f"start_index_map = {index_map}",
            f"index_vector_dim = {ivd}",
        ]
        nums = "#stablehlo.gather<" + ", ".join(f for f in fields if f) + ">"
        body = (
            f'  %0 = "stablehlo.gather"(%a0, %a1) {{dimension_numbers = {nums}, slice_sizes = {_arr(sizes)}, '
            f"indices_are_sorted = false}} : ({_t(operand)}, {_t(indices, 'i32')}) -> {_t(res)}\n  return %0 : {_t(res)}"
        )
        out.append(([_t(operand), _t(indices, "i32")], body, [_t(res)]))
    return out


_UPDATES = [
    "    %r = stablehlo.add %x, %y : tensor<f32>\n    stablehlo.return %r : tensor<f32>",
    "    %r = stablehlo.maximum %y, %x : tensor<f32>\n    stablehlo.return %r : tensor<f32>",
    "    %r = stablehlo.subtract %x, %y : tensor<f32>\n    stablehlo.return %r : tensor<f32>",
    "    stablehlo.return %y : tensor<f32>",
]


def _scatters(rng: random.Random, count: int) -> list[tuple[list[str], str, list[str]]]:
    out = []
    for _ in range(count):
        r = rng.randint(1, 4)
        operand = [rng.randint(1, 6) for _ in range(r)]
        dims = list(range(r))
        batching = sorted(rng.sample(dims, rng.randint(0, min(2, r - 1))))
        free = [d for d in dims if d not in batching]
        inserted = sorted(rng.sample(free, rng.randint(0, len(free))))
        index_map = rng.sample(free, rng.randint(1, len(free)))
        indices, ivd, ibatch = _indices(rng, operand, batching, len(index_map))
        window = [rng.randint(1, operand[d]) for d in dims if d not in inserted and d not in batching]
        batch = [s for k, s in enumerate(indices) if k != ivd]
        rank = len(batch) + len(window)
        wdims = sorted(rng.sample(range(rank), len(window)))
        upd, bi, wi = [], iter(batch), iter(window)
        for k in range(rank):
            upd.append(next(wi) if k in wdims else next(bi))
        fields = [
            f"update_window_dims = {wdims}" if wdims else "",
            f"inserted_window_dims = {inserted}" if inserted else "",
            f"input_batching_dims = {batching}" if batching else "",
            f"scatter_indices_batching_dims = {ibatch}" if ibatch else "",
            f"scatter_dims_to_operand_dims = {index_map}",
            f"index_vector_dim = {ivd}",
        ]
        nums = "#stablehlo.scatter<" + ", ".join(f for f in fields if f) + ">"
        body = (
            f'  %0 = "stablehlo.scatter"(%a0, %a1, %a2) ({{\n  ^bb0(%x: tensor<f32>, %y: tensor<f32>):\n{rng.choice(_UPDATES)}\n'
            f"  }}) {{scatter_dimension_numbers = {nums}}} : ({_t(operand)}, {_t(indices, 'i32')}, {_t(upd)}) -> {_t(operand)}\n"
            f"  return %0 : {_t(operand)}"
        )
        out.append(([_t(operand), _t(indices, "i32"), _t(upd)], body, [_t(operand)]))
    return out


def _valid_only(m: _Module, candidates: list[tuple[list[str], str, list[str]]]) -> None:
    """Adds the candidates that jaxlib's verifier accepts (the generators are approximate)."""
    from jaxlib.mlir import ir
    from test_rules_mlir import context

    for args, body, results in candidates:
        probe = _Module()
        probe.add(args, body, results)
        with context():
            try:
                ir.Module.parse(probe.text())
            except ir.MLIRError:
                continue
        m.add(args, body, results)


@pytest.mark.parametrize("kind", ["reshape", "convolution", "window", "structural", "gather", "scatter"])
def test_random_ops_match_shardy(kind: str) -> None:
    rng = random.Random(f"{SEED}-{kind}")
    m = _Module()
    {
        "reshape": lambda: _reshapes(rng, m, 1500),
        "convolution": lambda: _convolutions(rng, m, 600),
        "window": lambda: _windows(rng, m, 500),
        "structural": lambda: _structural(rng, m, 400),
        "gather": lambda: _valid_only(m, _gathers(rng, 500)),
        "scatter": lambda: _valid_only(m, _scatters(rng, 500)),
    }[kind]()
    assert len(m.funcs) >= 300, f"only {len(m.funcs)} valid {kind} ops were generated"
    text = m.text()
    for conservative in (False, True):
        c = compare_module(text, conservative)
        assert c.ruled >= len(m.funcs), (c.ruled, len(m.funcs))
        assert c.matches == c.ops, c.mismatches[:5]
