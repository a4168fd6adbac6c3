"""Broken text for the fault corpus (``shardwise.testing.faults``): the seed programs, the MLIR
mutators that break them (``mutate_mlir``), and generators of sharding, mesh and shape text as a
user types it (``gen_sharding_text``, ``gen_mesh_text``, ``gen_shape_text``; often wrong when
``wild``). The two share their pieces: a mutator splices in generated shardings and meshes, a
generator adds noise with the mutators' truncation."""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Sequence

# ---------------------------------------------------------------------------------------------
# Seed programs: small, so that partitioning and simulating them takes milliseconds.

SEEDS: dict[str, str] = {
    "reduce": """sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<4x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}) -> tensor<4xf32> {
  %0 = stablehlo.negate %arg0 : tensor<4x4xf32>
  %cst = stablehlo.constant dense<0.0> : tensor<f32>
  %1 = stablehlo.reduce(%0 init: %cst) applies stablehlo.add across dimensions = [1] : (tensor<4x4xf32>, tensor<f32>) -> tensor<4xf32>
  return %1 : tensor<4xf32>
}
""",
    "dot": """module @jit_dot attributes {mhlo.num_partitions = 4 : i32} {
  sdy.mesh @mesh = <["x"=2, "y"=2]>
  func.func @main(%arg0: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg1: tensor<16x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> (tensor<8x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x", ?}, {?}]>}) {
    %0 = stablehlo.dot_general %arg0, %arg1, contracting_dims = [1] x [0], precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x8xf32>) -> tensor<8x8xf32>
    %1 = sdy.sharding_constraint %0 <@mesh, [{"y"}, {"x"}]> : tensor<8x8xf32>
    %2 = stablehlo.add %1, %1 : tensor<8x8xf32>
    return %2 : tensor<8x8xf32>
  }
}
""",
    "while": """sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}) -> tensor<4x8xf32> {
  %0 = sdy.constant dense<0> : tensor<i32>
  %1:2 = stablehlo.while(%iterArg = %0, %iterArg_0 = %arg0) : tensor<i32>, tensor<4x8xf32>
  cond {
    %2 = sdy.constant dense<3> : tensor<i32>
    %3 = stablehlo.compare LT, %iterArg, %2 : (tensor<i32>, tensor<i32>) -> tensor<i1>
    stablehlo.return %3 : tensor<i1>
  } do {
    %2 = sdy.constant dense<1> : tensor<i32>
    %3 = stablehlo.add %iterArg, %2 : tensor<i32>
    %4 = stablehlo.sine %iterArg_0 : tensor<4x8xf32>
    stablehlo.return %3, %4 : tensor<i32>, tensor<4x8xf32>
  }
  return %1#1 : tensor<4x8xf32>
}
""",
    "reshape": """sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<4x8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}, {"y"}]>}, %arg1: tensor<f32>) -> tensor<4x4x8x4xf32> {
  %0 = stablehlo.reshape %arg0 : (tensor<4x8x16xf32>) -> tensor<4x8x4x4xf32>
  %1 = stablehlo.transpose %0, dims = [0, 2, 1, 3] : (tensor<4x8x4x4xf32>) -> tensor<4x4x8x4xf32>
  %2 = stablehlo.broadcast_in_dim %arg1, dims = [] : (tensor<f32>) -> tensor<4x4x8x4xf32>
  %3 = stablehlo.multiply %1, %2 : tensor<4x4x8x4xf32>
  return %3 : tensor<4x4x8x4xf32>
}
""",
    "case": """sdy.mesh @empty_mesh = <[]>
sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<f32> {sdy.sharding = #sdy.sharding<@empty_mesh, []>}, %arg1: tensor<8x16xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {}]>}, %arg2: tensor<16x4xf32> {sdy.sharding = #sdy.sharding<@mesh, [{}, {"y"}]>}) -> tensor<8x4xf32> {
  %0 = sdy.constant dense<0.000000e+00> : tensor<f32>
  %1 = stablehlo.compare GT, %arg0, %0 : (tensor<f32>, tensor<f32>) -> tensor<i1>
  %2 = stablehlo.convert %1 : (tensor<i1>) -> tensor<i32>
  %3 = "stablehlo.case"(%2) ({
    %4 = stablehlo.dot %arg1, %arg2, precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    %5 = stablehlo.negate %4 : tensor<8x4xf32>
    stablehlo.return %5 : tensor<8x4xf32>
  }, {
    %4 = stablehlo.dot %arg1, %arg2, precision = [DEFAULT, DEFAULT] : (tensor<8x16xf32>, tensor<16x4xf32>) -> tensor<8x4xf32>
    stablehlo.return %4 : tensor<8x4xf32>
  }) : (tensor<i32>) -> tensor<8x4xf32>
  return %3 : tensor<8x4xf32>
}
""",
    "manual": """sdy.mesh @mesh = <["x"=2]>
func.func @main(%arg0: tensor<8x4xf32>) -> tensor<8x4xf32> {
  %0 = sdy.manual_computation(%arg0) in_shardings=[<@mesh, [{"x"}, {}]>] out_shardings=[<@mesh, [{"x"}, {}]>] manual_axes={"x"} (%arg1: tensor<4x4xf32>) {
    %1 = stablehlo.multiply %arg1, %arg1 : tensor<4x4xf32>
    sdy.return %1 : tensor<4x4xf32>
  } : (tensor<8x4xf32>) -> tensor<8x4xf32>
  %2 = stablehlo.add %0, %0 : tensor<8x4xf32>
  return %2 : tensor<8x4xf32>
}
""",
    "group": """sdy.mesh @mesh = <["x"=2, "y"=2]>
func.func @main(%arg0: tensor<4x8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}, {"y"}]>}, %arg1: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = stablehlo.sine %arg0 : tensor<4x8xf32>
  sdy.sharding_group %0 group_id=0 : tensor<4x8xf32>
  %1 = stablehlo.cosine %arg1 : tensor<4x8xf32>
  sdy.sharding_group %1 group_id=0 : tensor<4x8xf32>
  %2 = stablehlo.add %0, %1 : tensor<4x8xf32>
  return %2 : tensor<4x8xf32>
}
""",
}


HUGE_INTS = (
    0,
    -1,
    1,
    3,
    7,
    2**31 - 1,
    2**31,
    2**32,
    2**53 + 1,
    2**63 - 1,
    2**63,
    2**64,
    -(2**63) - 1,
    10**30,
)

# ---------------------------------------------------------------------------------------------
# MLIR mutators: each takes (rng, text) and returns the mutated text (str) or raw bytes.

_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[%@#^!]?[\w.$]+|->|\S')
_INT = re.compile(r"(?<![\w.])\d+(?![\w.])")
_AXIS = re.compile(r'"[a-z]"(?=[,}\]=:])|"[a-z]"(?= *[,}])')
_SHARDING = re.compile(r"<@\w+, \[[^<>]*?\](?:, replicated=\{[^}]*\})?>")
_MESH = re.compile(r'<\[(?:"\w+"=\d+(?:, )?)*\](?:, device_ids=\[[\d, ]*\])?>')
_TENSOR = re.compile(r"tensor<((?:\d+x)*)(\w+)>")


def _tokens(text: str) -> list[re.Match[str]]:
    return list(_TOKEN.finditer(text))


def _splice(text: str, start: int, end: int, new: str) -> str:
    return text[:start] + new + text[end:]


def mut_flip(rng: random.Random, text: str) -> str | bytes:
    data = bytearray(text.encode())
    for _ in range(rng.choice((1, 1, 2, 5))):
        if not data:
            break
        i = rng.randrange(len(data))
        data[i] = rng.choice(b'{}[]()<>"%@#:,=?-x0123456789 \n\x00' + bytes([rng.randrange(256)]))
    return bytes(data)


def mut_truncate(rng: random.Random, text: str) -> str:
    return text[: rng.randrange(len(text) + 1)]


def mut_delete_token(rng: random.Random, text: str) -> str:
    toks = _tokens(text)
    for _ in range(rng.choice((1, 1, 3))):
        if not toks:
            break
        t = toks.pop(rng.randrange(len(toks)))
        text = _splice(text, t.start(), t.end(), "")
        toks = _tokens(text)
    return text


def mut_duplicate_token(rng: random.Random, text: str) -> str:
    toks = _tokens(text)
    t = rng.choice(toks)
    return _splice(
        text,
        t.end(),
        t.end(),
        " " * rng.randrange(2) + t.group(0) * rng.choice((1, 1, 2, 50)),
    )


def mut_swap_tokens(rng: random.Random, text: str) -> str:
    toks = _tokens(text)
    if len(toks) < 2:
        return text
    a, b = sorted(rng.sample(range(len(toks)), 2))
    ta, tb = toks[a], toks[b]
    return text[: ta.start()] + tb.group(0) + text[ta.end() : tb.start()] + ta.group(0) + text[tb.end() :]


def mut_number(rng: random.Random, text: str) -> str:
    nums = list(_INT.finditer(text))
    if not nums:
        return text
    for _ in range(rng.choice((1, 1, 3))):
        m = rng.choice(nums)
        text = _splice(text, m.start(), m.end(), str(rng.choice(HUGE_INTS)))
        nums = list(_INT.finditer(text))
    return text


def _nested(rng: random.Random, depth: int) -> str:
    kind = rng.choice(("dict", "array", "tuple", "dense", "loc"))
    if kind == "dict":
        return "{a = " + "{b = " * depth + "1" + "}" * depth + "}"
    if kind == "array":
        return "{a = " + "[" * depth + "]" * depth + "}"
    if kind == "tuple":
        return "{a = " + "tuple<" * depth + "f32" + ">" * depth + "}"
    if kind == "dense":
        return "{a = dense<" + "[" * depth + "1.0" + "]" * depth + "> : tensor<" + "1x" * depth + "f32>}"
    return "loc(" + "fused[" * depth + '"a"' + "]" * depth + ")"


def mut_nesting(rng: random.Random, text: str) -> str:
    depth = rng.choice((3, 50, 257, 300, 1025, 3000, 12000, 100000))
    nest = _nested(rng, depth)
    if nest.startswith("loc("):
        i = text.rfind("return")
        j = text.find("\n", i) if i >= 0 else -1
        j = len(text) if j < 0 else j
        return _splice(text, j, j, " " + nest)
    # as an attribute dictionary of the first mesh, or wrapped around the whole module
    m = _MESH.search(text)
    if m is not None and rng.random() < 0.8:
        return _splice(text, m.end(), m.end(), " " + nest)
    return "module {\n" * min(depth, 600) + text + "}\n" * min(depth, 600)


_BAD_AXES = (
    '"z"',
    '""',
    '"x\u00e9"',
    '"x", "x"',
    '"x":(1)2',
    '"x":(2)1',
    '"x":(3)2',
    '"y":(1)4',
    '"x":(0)2',
    '"\\00"',
    '"x"x',
    '"x":(1)99999999999999999999',
)


def mut_axis(rng: random.Random, text: str) -> str:
    axes = list(_AXIS.finditer(text))
    if not axes:
        return text
    m = rng.choice(axes)
    return _splice(text, m.start(), m.end(), rng.choice(_BAD_AXES))


def mut_sharding(rng: random.Random, text: str) -> str:
    shardings = list(_SHARDING.finditer(text))
    if not shardings:
        return text
    m = rng.choice(shardings)
    body = m.group(0)
    choice = rng.randrange(6)
    if choice == 0:
        new = body.replace("@mesh", rng.choice(("@nomesh", "@empty_mesh", '@"mesh"', "@mesh2", "@")), 1)
    elif choice == 1:
        new = body.replace("[", "[{}, ", 1) if rng.random() < 0.5 else re.sub(r"\{[^{}]*\}(, )?", "", body, count=1)
    elif choice == 2:
        new = body.replace(
            "}",
            "}" + rng.choice(("p0", "p-1", "p99999999999999999999", "p1p2", "p")),
            1,
        )
    elif choice == 3:
        new = (
            body[:-1]
            + rng.choice(
                (
                    ', replicated={"x"}',
                    ', replicated={"y", "x"}',
                    ", replicated={}",
                    ', unreduced={"x"}',
                    ", foo",
                )
            )
            + ">"
        )
    elif choice == 4:
        new = "<@mesh, " + gen_dims_text(rng, ("x", "y")) + ">"
    else:
        new = body.replace("}", ", ?}", 1)
    return _splice(text, m.start(), m.end(), new)


def mut_mesh(rng: random.Random, text: str) -> str:
    meshes = list(_MESH.finditer(text))
    if not meshes:
        return text
    m = rng.choice(meshes)
    new = gen_mesh_text(rng, sdy=True)
    return _splice(
        text,
        m.start(),
        m.end(),
        new.removeprefix("#sdy.mesh"),
    )


def mut_tensor(rng: random.Random, text: str) -> str:
    ts = list(_TENSOR.finditer(text))
    if not ts:
        return text
    m = rng.choice(ts)
    dims = [d for d in m.group(1).split("x") if d]
    if dims and rng.random() < 0.7:
        i = rng.randrange(len(dims))
        dims[i] = str(rng.choice((0, 1, 3, 7, 2**31, 2**40, 2**62, 2**63, "?", "-1")))
    elem = (
        m.group(2)
        if rng.random() < 0.7
        else rng.choice(("i1", "bf16", "f8E4M3FN", "complex<f32>", "i4", "ui64", "f128", "index"))
    )
    return _splice(
        text,
        m.start(),
        m.end(),
        "tensor<" + "".join(d + "x" for d in dims) + elem + ">",
    )


def mut_op_name(rng: random.Random, text: str) -> str:
    ops = list(re.finditer(r"\b(stablehlo|sdy)\.\w+", text))
    if not ops:
        return text
    m = rng.choice(ops)
    new = rng.choice(
        (
            "stablehlo.foo",
            "stablehlo.add",
            "stablehlo.dot_general",
            "sdy.all_gather",
            "stablehlo.custom_call",
            "sdy.manual_computation",
            "func.call",
            "stablehlo.while",
        )
    )
    return _splice(text, m.start(), m.end(), new)


def mut_bytes(rng: random.Random, text: str) -> bytes:
    data = text.encode()
    i = rng.randrange(len(data) + 1)
    insert = rng.choice((b"\xff\xfe", b"\xc3", b"\xed\xa0\x80", b"\x00", b"\xef\xbb\xbf"))
    if rng.random() < 0.3:
        return b"\xef\xbb\xbf" + data  # a byte-order mark
    return data[:i] + insert + data[i:]


def mut_whole(rng: random.Random, text: str) -> str | bytes:
    return rng.choice(
        (
            "",
            " \n",
            "module {}",
            "module {",
            "}",
            "\x00",
            "func.func @main() {\n  return\n}\n",
            text * 2,
            text.replace("@main", "@other"),
        )
    )


def mut_reshard(rng: random.Random, text: str) -> str:
    """A sharding replaced by another well-formed one on the same axes (often valid)."""
    shardings = list(_SHARDING.finditer(text))
    if not shardings:
        return text
    m = rng.choice(shardings)
    axes = sorted(set(re.findall(r'"(\w+)"=', text))) or ["x"]
    rank = m.group(0).count("{") - m.group(0).count("replicated={")
    dims = []
    for _ in range(rank if rng.random() < 0.9 else rank + rng.choice((-1, 1))):
        refs = rng.sample(axes, rng.choice((0, 0, 1, 1, min(2, len(axes)))))
        dims.append(
            "{"
            + ", ".join(f'"{a}"' for a in refs)
            + (", ?" if refs and rng.random() < 0.2 else "?" if not refs and rng.random() < 0.2 else "")
            + "}"
        )
    return _splice(text, m.start(), m.end(), "<@mesh, [" + ", ".join(dims) + "]>")


def mut_mesh_size(rng: random.Random, text: str) -> str:
    """A mesh axis resized to a small size (non-dividing sizes are valid and padded)."""
    sizes = list(re.finditer(r'("\w+")=(\d+)', text))
    if not sizes:
        return text
    m = rng.choice(sizes)
    return _splice(text, m.start(), m.end(), f"{m.group(1)}={rng.choice((1, 3, 4, 5, 8))}")


def mut_dim_everywhere(rng: random.Random, text: str) -> str:
    """One dimension size changed in every tensor type that has it (often still valid)."""
    dims = sorted({d for m in _TENSOR.finditer(text) for d in m.group(1).split("x") if d})
    if not dims:
        return text
    old, new = rng.choice(dims), str(rng.choice((1, 3, 5, 6, 7, 12)))
    return _TENSOR.sub(
        lambda m: (
            "tensor<" + "".join((new if d == old else d) + "x" for d in m.group(1).split("x") if d) + m.group(2) + ">"
        ),
        text,
    )


def mut_drop_sharding(rng: random.Random, text: str) -> str:
    """An argument's or result's sharding attribute removed."""
    attrs = list(re.finditer(r" \{sdy\.sharding = #sdy\.sharding<[^>]*>\}", text))
    if not attrs:
        return text
    m = rng.choice(attrs)
    return _splice(text, m.start(), m.end(), "")


#: Mutators that usually keep the text parseable (so propagation and partitioning run).
SEMANTIC_MUTATORS = (
    "reshard",
    "mesh-size",
    "dim-everywhere",
    "drop-sharding",
    "bad-axis",
    "bad-sharding",
    "huge-number",
)

MLIR_MUTATORS: dict[str, Callable[[random.Random, str], str | bytes]] = {
    "reshard": mut_reshard,
    "mesh-size": mut_mesh_size,
    "dim-everywhere": mut_dim_everywhere,
    "drop-sharding": mut_drop_sharding,
    "flip": mut_flip,
    "truncate": mut_truncate,
    "delete-token": mut_delete_token,
    "duplicate-token": mut_duplicate_token,
    "swap-tokens": mut_swap_tokens,
    "huge-number": mut_number,
    "deep-nesting": mut_nesting,
    "bad-axis": mut_axis,
    "bad-sharding": mut_sharding,
    "bad-mesh": mut_mesh,
    "bad-type": mut_tensor,
    "op-name": mut_op_name,
    "non-utf8": mut_bytes,
    "whole": mut_whole,
}


def mutate_mlir(rng: random.Random, text: str) -> tuple[list[str], bytes]:
    """1 to 3 mutations of ``text`` (none in one case of 20: the seed programs themselves);
    the mutators' names and the bytes to write."""
    names: list[str] = []
    data: str | bytes = text
    r = rng.random()
    if r < 0.05:
        return ["none"], text.encode()
    semantic = r < 0.5
    for _ in range(rng.choice((1, 1, 1, 2, 3))):
        name = rng.choice(SEMANTIC_MUTATORS[:4] if semantic else list(MLIR_MUTATORS))
        names.append(name)
        data = MLIR_MUTATORS[name](rng, data if isinstance(data, str) else data.decode("utf-8", "replace"))
    return names, data.encode() if isinstance(data, str) else data


# ---------------------------------------------------------------------------------------------
# Shardings, meshes and shapes as text.

_NAMES = ("x", "y", "z", "", "x\u00e9", "\\00", "a b", '\\"', "data", "_", "1")


def gen_mesh_text(rng: random.Random, *, sdy: bool | None = None, wild: bool = True) -> str:
    """A mesh as the command line (``x=2,y=4``) or Shardy (``#sdy.mesh<[...]>``) writes it:
    often wrong when ``wild``, else distinct plain names and small sizes."""
    if not wild:
        names = rng.sample(("x", "y", "z"), rng.choice((1, 2, 2, 3)))
        sizes = [rng.choice((1, 2, 2, 4)) for _ in names]
        if sdy if sdy is not None else rng.random() < 0.5:
            return "#sdy.mesh<[" + ", ".join(f'"{a}"={s}' for a, s in zip(names, sizes)) + "]>"
        return ",".join(f"{a}={s}" for a, s in zip(names, sizes))
    n = rng.choice((0, 1, 1, 2, 2, 3, 20))
    names = [rng.choice(_NAMES[:3]) if rng.random() < 0.85 else rng.choice(_NAMES) for _ in range(n)]
    sizes = [rng.choice((1, 2, 2, 4, 3)) if rng.random() < 0.85 else rng.choice(HUGE_INTS) for _ in range(n)]
    if sdy if sdy is not None else rng.random() < 0.5:
        axes = ", ".join(f'"{a}"={s}' for a, s in zip(names, sizes))
        ids = ""
        if rng.random() < 0.2:
            total = 1
            for s in sizes:
                total = total * s if 0 < s < 64 else 2
            perm = list(range(min(total, 64)))
            rng.shuffle(perm)
            if rng.random() < 0.5 and perm:
                perm[rng.randrange(len(perm))] = rng.choice(HUGE_INTS)
            ids = f", device_ids=[{', '.join(map(str, perm))}]"
        text = f"#sdy.mesh<[{axes}]{ids}>"
    else:
        text = ",".join(f"{a}={s}" for a, s in zip(names, sizes))
        if rng.random() < 0.15:
            text = rng.choice(
                (
                    "x",
                    "x=",
                    "=2",
                    "x=2,,y=2",
                    " x = 2 ",
                    "x=2;y=4",
                    "x=0x10",
                    "x=+2",
                    "x=2,",
                    "x=\u0662",
                )
            )
    return syntax_noise(rng, text, 0.1)


def _axis_ref_text(rng: random.Random, axes: Sequence[str], wild: bool = True) -> str:
    name = rng.choice(axes) if axes and (not wild or rng.random() < 0.85) else rng.choice(_NAMES)
    if rng.random() < 0.2:
        if wild:
            pre, size = (
                rng.choice((1, 2, 3, 4, 0, -1, 2**63)),
                rng.choice((1, 2, 4, 3, 0, 2**64)),
            )
        else:
            pre, size = rng.choice((1, 2)), 2
        return f'"{name}":({pre}){size}'
    return f'"{name}"'


def gen_dims_text(rng: random.Random, axes: Sequence[str], wild: bool = True) -> str:
    dims = []
    for _ in range(rng.choice((0, 1, 2, 2, 2, 3, 4, 40) if wild else (1, 2, 2, 3))):
        refs = [_axis_ref_text(rng, axes, wild) for _ in range(rng.choice((0, 0, 1, 1, 2)))]
        if not wild:
            refs = list(dict.fromkeys(refs))
        if rng.random() < 0.2:
            refs.append("?")
        prio = f"p{rng.choice((0, 1, 2, -1, 2**70) if wild else (0, 1, 2))}" if rng.random() < 0.15 else ""
        dims.append("{" + ", ".join(refs) + "}" + prio)
    return "[" + ", ".join(dims) + "]"


def gen_sharding_text(rng: random.Random, axes: Sequence[str], wild: bool = True) -> str:
    """A ``#sdy.sharding<...>`` (or stripped ``<...>``): often wrong when ``wild``, else
    made of the mesh's ``axes`` (still breaking rules now and then)."""
    mesh = (
        rng.choice(
            (
                "@mesh",
                "@mesh",
                "@mesh",
                "@other",
                '@"m e s h"',
                "mesh<[]>",
                'mesh<["x"=2]>',
                "@",
            )
        )
        if wild
        else "@mesh"
    )
    text = f"<{mesh}, {gen_dims_text(rng, axes, wild)}"
    for key, chance in (("replicated", 0.2), ("unreduced", 0.1)):
        if rng.random() < chance:
            refs = (_axis_ref_text(rng, axes, wild) for _ in range(rng.choice((0, 1, 2))))
            text += f", {key}={{" + ", ".join(refs) + "}"
    text += ">"
    if rng.random() < 0.8:
        text = "#sdy.sharding" + text
    return syntax_noise(rng, text, 0.15) if wild else text


def gen_shape_text(rng: random.Random, wild: bool = True) -> str | None:
    if rng.random() < 0.2:
        return None
    n = rng.choice((0, 1, 2, 2, 3, 4) if wild else (1, 2, 2, 3))
    dims = [
        str(rng.choice((1, 2, 4, 8, 16, 3)))
        if not wild or rng.random() < 0.85
        else str(rng.choice((*HUGE_INTS, -1, -5, "a", "1.5", "")))
        for _ in range(n)
    ]
    return rng.choice((",", "x")).join(dims)


def syntax_noise(rng: random.Random, text: str, p: float) -> str:
    """``text``, or with probability ``p`` a typo of it: truncated, a character replaced, the
    whole repeated, or a comma doubled."""
    if not text or rng.random() >= p:
        return text
    choice = rng.randrange(4)
    if choice == 0:
        return mut_truncate(rng, text)
    if choice == 1:
        i = rng.randrange(len(text))
        return text[:i] + rng.choice('{}[]()<>"@#:,=?p \x00\udcff\u00e9') + text[i + 1 :]
    if choice == 2:
        return text * rng.choice((2, 3))
    return text.replace(",", ",,", 1)
