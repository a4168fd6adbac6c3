"""The fault corpus of issue 25 ("No crash", "Output safety"): generators of broken inputs and
the driver that runs them in a memory-limited worker process, one case at a time, with a
per-case timeout. Used by ``tests/python/test_faults.py`` (about 1,200 cases, in CI) and
``benches/fault_campaign.py`` (thousands).

Categories, each a stream of cases drawn from ``random.Random(f"{seed}/{category}/{i}")`` (so a
case is reproduced from its seed, category and index alone: ``python tests/python/faults.py
--replay CATEGORY SEED I``):

``sharding``   sharding, mesh and shape text as a user types it (``shardwise show``), and the
               conversions to and from other formats (HLO, PartitionSpec, MindSpore, hidet,
               DTensor);
``mlir``       mutated MLIR programs (byte flips, truncation, token deletion and duplication,
               deep nesting, huge numbers, bad axis names, bad sharding and mesh attributes,
               non-UTF-8) through ``load_mlir``/``propagate`` and ``shardwise propagate``,
               ``partition``, ``rules`` and ``auto``;
``iopddl``     mutated IOPDDL instances (wrong types, floats, negative and huge numbers,
               mismatched shapes, missing keys, deep nesting, broken gzip) through
               ``read_instance`` and ``shardwise iopddl``;
``outdir``     tampered partition directories (``meta.json`` edits, missing or extra rank
               files, symbolic links, FIFOs, non-UTF-8) through ``load_partition`` and
               ``shardwise run``, and ``shardwise partition -o`` over them.

Every case checks, in the worker: the Python API raises only shardwise's errors (``OSError``
for I/O); the command line (``shardwise.cli.main``, in process) exits 0, 1 (a failed check,
``cost: inf``) or 2 with exactly one line ``shardwise: error: ...`` of at most
``MAX_ERROR_CHARS`` on stderr (``shardwise: warning: ...`` lines aside); an output that existed
keeps its bytes when the command fails, a written one reads back, a partition directory that
was read is unchanged, and no temporary file is left beside an output. The driver adds crashes
(the worker killed by a signal or exiting) and hangs (a case past its timeout).
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import itertools
import json
import os
import random
import re
import select
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
import traceback
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from test_iopddl import EXAMPLE as IOPDDL_EXAMPLE  # the contest's example instance

#: The longest ``shardwise: error:`` line accepted (issue 25: error messages are bounded).
MAX_ERROR_CHARS = 1000
#: Address-space limit of every process the suite starts (``RLIMIT_AS``).
MEMORY_LIMIT = 4 << 30
CATEGORIES = ("sharding", "mlir", "iopddl", "outdir")
#: What a case may end in besides "ok": the problems, in the order the report lists them.
PROBLEMS = (
    "crash",
    "hang",
    "data-loss",
    "stderr",
    "long-message",
    "traceback",
    "exit-code",
    "wrong",
)
#: Problems the corpus finds whose fix belongs to files outside the suite's reach, while they
#: are not fixed: a name -> (a pattern matched against ``"STATUS: DETAIL [input: INPUT]"`` of a
#: case, where the fix belongs). The CI run leaves them out (give each an xfail test of its own
#: in test_faults.py); the campaign counts them with the rest and marks them "known".
KNOWN_ISSUES: dict[str, tuple[str, str]] = {
    # None at present. The first campaign's finds (is_partition_dir reading a FIFO, /dev/zero or
    # deep JSON; a maximal-mesh value in the projection; an empty module's export) are fixed
    # and have regression tests in test_faults.py.
}


def known_issue(o: Outcome) -> str | None:
    """The name of the known issue ``o`` is an instance of, or ``None``."""
    for name, (pattern, _) in KNOWN_ISSUES.items():
        if re.search(pattern, f"{o.status}: {o.detail} [input: {' '.join(map(str, o.input))}]"):
            return name
    return None


#: The bytes an existing output holds before a command that must not change it on failure.
SENTINEL = b"// the user's previous output: must survive a failed command\n"

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
    return _syntax_noise(rng, text, 0.1)


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
    return _syntax_noise(rng, text, 0.15) if wild else text


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


def _syntax_noise(rng: random.Random, text: str, p: float) -> str:
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


# ---------------------------------------------------------------------------------------------
# IOPDDL instances.


def gen_instance(rng: random.Random) -> dict[str, Any]:
    """A valid random instance: 1 to 12 nodes of 1 to 4 strategies, a few edges."""
    n = rng.randint(1, 12)
    ks = [rng.randint(1, 4) for _ in range(n)]
    intervals = []
    for _ in range(n):
        a = rng.randint(0, 50)
        intervals.append([a, a + rng.randint(0, 50)])
    edges = sorted(
        {(a, b) for a, b in ((rng.randrange(n), rng.randrange(n)) for _ in range(rng.randint(0, 2 * n))) if a < b}
    )
    return {
        "problem": {
            "name": f"random-{n}",
            "nodes": {
                "intervals": intervals,
                "costs": [[rng.randint(0, 100) for _ in range(k)] for k in ks],
                "usages": [[rng.randint(0, 30) for _ in range(k)] for k in ks],
            },
            "edges": {
                "nodes": [list(e) for e in edges],
                "costs": [[rng.randint(0, 100) for _ in range(ks[a] * ks[b])] for a, b in edges],
            },
            "usage_limit": rng.choice((None, rng.randint(0, 200), 10**6)),
        }
    }


def _paths(obj: Any, prefix: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield prefix
    if isinstance(obj, dict):
        for k, v in obj.items():
            yield from _paths(v, (*prefix, k))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            yield from _paths(v, (*prefix, i))


def _weird_value(rng: random.Random, old: Any) -> Any:
    return rng.choice(
        (
            None,
            True,
            False,
            "1",
            "",
            1.5,
            2.0,
            -1,
            -(2**31),
            2**63,
            2**64,
            10**30,
            -(10**30),
            float("nan"),
            float("inf"),
            [],
            [[]],
            {},
            [old],
            {"x": old},
            [1, 2, 3],
            [[1, 2], [3]],
            0,
        )
    )


def mutate_json(rng: random.Random, data: Any) -> tuple[list[str], Any]:
    """1 to 3 structural mutations of decoded JSON ``data`` (copied): a value replaced by a
    value of another type or a huge or negative one, a key deleted or added, a list shortened,
    lengthened or emptied."""
    data = json.loads(json.dumps(data))
    names = []
    for _ in range(rng.choice((1, 1, 2, 3))):
        paths = list(_paths(data))[1:]
        if not paths:
            break
        path = rng.choice(paths)
        parent = data
        for k in path[:-1]:
            parent = parent[k]
        key = path[-1]
        choice = rng.randrange(5)
        if choice == 0:
            names.append("wrong-value")
            parent[key] = _weird_value(rng, parent[key])
        elif choice == 1:
            names.append("delete")
            del parent[key]
        elif choice == 2 and isinstance(parent[key], list):
            names.append("resize")
            lst = parent[key]
            if lst and rng.random() < 0.5:
                del lst[rng.randrange(len(lst)) :]
            else:
                lst.extend(json.loads(json.dumps(lst[:1] or [0])) * rng.choice((1, 3)))
        elif choice == 3 and isinstance(parent[key], int) and not isinstance(parent[key], bool):
            names.append("number")
            parent[key] = rng.choice((*HUGE_INTS, -parent[key] - 1, parent[key] + 1, float(parent[key])))
        else:
            names.append("extra-key")
            if isinstance(parent, dict):
                parent[rng.choice(("extra", "costs", "nodes", ""))] = _weird_value(rng, None)
            else:
                parent.append(_weird_value(rng, None))
    return names, data


def mutate_iopddl(rng: random.Random) -> tuple[list[str], bytes, str]:
    """A broken (or sometimes valid) IOPDDL instance: names of the mutations, the file's bytes
    and its suffix (``.json`` or ``.json.gz``)."""
    base = IOPDDL_EXAMPLE if rng.random() < 0.4 else gen_instance(rng)
    names: list[str] = []
    data: Any = base
    r = rng.random()
    if r < 0.6:
        names, data = mutate_json(rng, base)
    raw = json.dumps(data).encode()
    if r >= 0.6:
        choice = rng.randrange(9)
        if choice == 0:
            names.append("truncate")
            raw = raw[: rng.randrange(len(raw))]
        elif choice == 1:
            names.append("flip")
            flipped = mut_flip(rng, raw.decode())
            raw = flipped if isinstance(flipped, bytes) else flipped.encode()
        elif choice == 2:
            names.append("deep-nesting")
            depth = rng.choice((100, 1000, 100000))
            raw = b'{"problem": ' + b"[" * depth + b"]" * depth + b"}"
        elif choice == 3:
            names.append("non-json")
            raw = rng.choice(
                (
                    b"",
                    b"\xff\xfe{}",
                    b"\xef\xbb\xbf" + raw,
                    b"NaN",
                    b"[]",
                    b"null",
                    b'"problem"',
                    raw + b"garbage",
                )
            )
        elif choice == 4:
            names.append("nan")
            raw = raw.replace(b"15", b"NaN", 1).replace(b"10", b"Infinity", 1)
        elif choice == 5:
            names.append("huge-shapes")
            n = rng.choice((1000, 20000))
            big = {
                "problem": {
                    "name": "big",
                    "nodes": {
                        "intervals": [[0, 1]] * n,
                        "costs": [[1, 2]] * n,
                        "usages": [[1, 1]] * n,
                    },
                    "edges": {
                        "nodes": [[i, i + 1] for i in range(n - 1)],
                        "costs": [[1, 2, 3, 4]] * (n - 1),
                    },
                    "usage_limit": rng.choice((None, n, 10 * n)),
                }
            }
            if rng.random() < 0.5:
                big["problem"]["edges"]["costs"][-1] = [1, 2, 3]  # type: ignore[index]
            raw = json.dumps(big).encode()
        elif choice == 6:
            names.append("bad-gzip")
            gz = gzip.compress(raw)
            raw = (
                gz[: rng.randrange(2, len(gz))]
                if rng.random() < 0.5
                else gz[:10] + bytes(rng.randrange(256) for _ in range(20)) + gz[30:]
            )
        elif choice == 7:
            names.append("gzip")
            raw = gzip.compress(raw)
        else:
            names.append("valid")
    suffix = ".json.gz" if raw[:2] == b"\x1f\x8b" else ".json"
    return names or ["valid"], raw, suffix


# ---------------------------------------------------------------------------------------------
# Tampered partition directories.


def _regular(path: Path) -> Path:
    """``path`` when it is a regular file (not followed if a link); ``ValueError`` otherwise, so
    that a second tampering never reads a FIFO or ``/dev/zero`` left by the first."""
    if not stat.S_ISREG(path.lstat().st_mode):
        raise ValueError(f"{path} is not a regular file")
    return path


def tamper_outdir(rng: random.Random, d: Path, outside: Path) -> list[str]:
    """Breaks the partition directory ``d`` in place; ``outside``: a valid MLIR file outside it
    (the target of symbolic links that must be refused). Returns what was done."""
    choice = rng.randrange(14)
    meta_path = d / "meta.json"
    ranks = sorted(p.name for p in d.glob("rank*.mlir"))
    if choice <= 3:
        meta = json.loads(_regular(meta_path).read_text())
        if choice == 0:
            meta["num_ranks"] = rng.choice((0, -1, 1, 3, 2**16, 2**16 + 1, 10**30, "2", 2.0, True, None, [2]))
            names = ["meta-num-ranks"]
        elif choice == 1:
            meta["func"] = rng.choice(("other", 123, None, "", "main\x00", ["main"], "rank0"))
            names = ["meta-func"]
        else:
            names, meta = mutate_json(rng, meta)
            names = ["meta-" + n for n in names]
        meta_path.write_text(json.dumps(meta))
        return names
    if choice == 4:
        data = _regular(meta_path).read_bytes()
        new = rng.choice(
            (
                b"",
                data[: rng.randrange(len(data))],
                b"\xff" + data,
                b"[]",
                b"{}",
                b'{"format": 1}',
                data.replace(b'"format": 1', b'"format": 2'),
                b"[" * 100000,
            )
        )
        meta_path.write_bytes(new)
        return ["meta-bytes"]
    if choice == 5:
        (d / rng.choice(ranks)).unlink()
        return ["rank-missing"]
    if choice == 6:
        shutil.copy(_regular(d / ranks[0]), d / f"rank{len(ranks)}.mlir")
        (d / "notes.txt").write_text("extra")
        return ["rank-extra"]
    if choice == 7:
        a, b = d / ranks[0], d / ranks[-1]
        tmp = d / "swap"
        a.rename(tmp)
        b.rename(a)
        tmp.rename(b)
        return ["rank-swap"]
    if choice == 8:
        target = d / rng.choice([*ranks, "partitioned.mlir"])
        _, data = mutate_mlir(rng, _regular(target).read_text())
        target.write_bytes(data)
        return ["mlir-mutated"]
    if choice == 9:
        victim = d / rng.choice([*ranks, "partitioned.mlir", "meta.json"])
        victim.unlink()
        how = rng.randrange(5)
        if how == 0:
            victim.symlink_to(outside)  # out of the directory
        elif how == 1:
            victim.symlink_to(victim.name)  # a loop
        elif how == 2:
            victim.symlink_to(d / "nowhere")  # dangling
        elif how == 3:
            victim.symlink_to("/dev/zero")
        else:
            victim.symlink_to(d)  # a directory
        return [f"symlink-{('outside', 'loop', 'dangling', 'device', 'directory')[how]}"]
    if choice == 10:
        victim = d / rng.choice([*ranks, "partitioned.mlir", "meta.json"])
        victim.unlink()
        if rng.random() < 0.5:
            os.mkfifo(victim)
            return ["fifo"]
        victim.mkdir()
        return ["directory"]
    if choice == 11:
        (d / os.fsdecode(b"rank\xff.mlir")).write_bytes(b"\xff\xfe")
        target = d / rng.choice(ranks)
        target.write_bytes(_regular(target).read_bytes().replace(b"main", b"m\xffin", 1))
        return ["non-utf8"]
    if choice == 12:
        data = _regular(meta_path).read_text()
        meta_path.write_text(data.replace('"x"', '"q"').replace("2", rng.choice(("3", "0", "99999999999999999999"))))
        return ["meta-mesh"]
    meta = json.loads(_regular(meta_path).read_text())
    for entry in meta.get("arguments", []) + meta.get("results", []):
        if rng.random() < 0.6:
            key = rng.choice(("global_shape", "local_shape", "dtype", "sharding"))
            entry[key] = rng.choice(
                (
                    [1],
                    [2**40, 4],
                    [-1, 4],
                    "f99",
                    '#sdy.sharding<@mesh, [{"q"}]>',
                    [],
                    None,
                    [[4]],
                    "i1",
                )
            )
    meta_path.write_text(json.dumps(meta))
    return ["meta-values"]


def snapshot(d: Path) -> dict[str, Any]:
    """What ``d`` holds, without following symbolic links: relative path -> kind and content
    hash (or link target)."""
    out: dict[str, Any] = {}
    if not d.exists() and not d.is_symlink():
        return {".": None}
    for root, dirs, files in os.walk(d, followlinks=False):
        for name in dirs + files:
            p = Path(root) / name
            rel = os.fsencode(p.relative_to(d)).hex()
            st = p.lstat()
            if stat.S_ISLNK(st.st_mode):
                out[rel] = ("link", os.readlink(p))
            elif stat.S_ISREG(st.st_mode):
                out[rel] = (
                    "file",
                    hashlib.sha256(p.read_bytes()).hexdigest(),
                    st.st_mode & 0o777,
                )
            else:
                out[rel] = ("other", stat.S_IFMT(st.st_mode))
    return out


def leftovers(d: Path, before: set[str] = frozenset()) -> list[str]:  # type: ignore[assignment]
    """Names in ``d`` that look like a temporary file or directory of an atomic write
    (``.NAME.XXXX``, ``*.tmp``) and were not there ``before``."""
    return sorted(n for n in os.listdir(d) if (n.startswith(".") or n.endswith(".tmp")) and n not in before)


# ---------------------------------------------------------------------------------------------
# The worker: runs cases of one category in this process and reports each on a private fd.


class Problem(Exception):
    """A case broke a rule; ``kind`` is one of ``PROBLEMS``."""

    def __init__(self, kind: str, detail: str) -> None:
        super().__init__(f"{kind}: {detail}")
        self.kind = kind
        self.detail = detail


def _where(e: BaseException) -> str:
    """``file:line`` of the innermost frame in shardwise (or the innermost frame)."""
    frames = traceback.extract_tb(e.__traceback__)
    inner = [f for f in frames if "shardwise" in f.filename and "faults.py" not in f.filename] or frames
    if not inner:
        return "?"
    f = inner[-1]
    return f"{Path(f.filename).name}:{f.lineno} ({f.name})"


def api(what: str, fn: Callable[..., Any], *args: Any, io_ok: bool = False, **kwargs: Any) -> tuple[bool, Any]:
    """``(True, value)``, or ``(False, error)`` for a shardwise error (and ``OSError`` when
    ``io_ok``); anything else raised, or an error message over ``MAX_ERROR_CHARS``, is a
    ``Problem``."""
    from shardwise.errors import ShardwiseError

    try:
        return True, fn(*args, **kwargs)
    except (KeyboardInterrupt, Problem):
        raise
    except ShardwiseError as e:
        if len(str(e)) > MAX_ERROR_CHARS:
            raise Problem(
                "long-message",
                f"{what}: {type(e).__name__} of {len(str(e))} characters: {str(e)[:160]!r}",
            ) from None
        return False, e
    except OSError as e:
        if io_ok:
            return False, e
        raise Problem("traceback", f"{what}: {type(e).__name__}: {str(e)[:200]} at {_where(e)}") from None
    except BaseException as e:  # noqa: BLE001 - PanicException, RecursionError, MemoryError, ...
        raise Problem("traceback", f"{what}: {type(e).__name__}: {str(e)[:200]!r} at {_where(e)}") from None


@dataclass
class CliResult:
    rc: int
    out: str
    err: str


def cli(argv: list[str], ok_codes: Sequence[int] = (0, 2)) -> CliResult:
    """``shardwise ARGV`` in this process (``shardwise.cli.main``) with its stdout and stderr
    captured; a ``Problem`` unless it exits with one of ``ok_codes`` and, for 2, exactly one
    bounded ``shardwise: error:`` line."""
    from shardwise.cli import main

    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
    except KeyboardInterrupt:
        raise
    except SystemExit as e:  # argparse
        rc = e.code if isinstance(e.code, int) else 1
    except BaseException as e:  # noqa: BLE001
        raise Problem(
            "traceback",
            f"shardwise {argv[0]}: {type(e).__name__}: {str(e)[:200]!r} at {_where(e)}",
        ) from None
    res = CliResult(rc, out.getvalue(), err.getvalue())
    check_stderr(res, ok_codes, f"shardwise {argv[0]}")
    return res


def check_stderr(res: CliResult, ok_codes: Sequence[int], what: str) -> None:
    """The rules for a command's exit code and standard error (module docstring)."""
    if "Traceback (most recent call last)" in res.err:
        raise Problem("traceback", f"{what}: a traceback on stderr: {res.err[-300:]!r}")
    if res.rc not in ok_codes:
        raise Problem(
            "exit-code",
            f"{what}: exit code {res.rc}, expected one of {list(ok_codes)}; stderr {res.err[-300:]!r}",
        )
    if res.rc == 2:
        # Blank lines aside: rich's transient progress display of ``propagate`` and ``auto``
        # leaves one before the error (a known issue of cli.py, tested on its own in
        # test_faults.py), which would hide every other finding of these commands.
        lines = [ln for ln in res.err.splitlines() if ln.strip() and not ln.startswith("shardwise: warning: ")]
        if len(lines) != 1 or not lines[0].startswith("shardwise: error: "):
            raise Problem(
                "stderr",
                f"{what}: exit 2 with {len(lines)} stderr lines, expected one 'shardwise: error:' line: {res.err[:300]!r}",
            )
        if len(lines[0]) > MAX_ERROR_CHARS:
            raise Problem(
                "long-message",
                f"{what}: an error line of {len(lines[0])} characters: {lines[0][:160]!r}",
            )


def _mlir_loads(path: Path, what: str) -> None:
    from shardwise.importers.mlir import load_mlir

    ok, e = api(f"re-reading {what}", load_mlir, path)
    if not ok:
        raise Problem("data-loss", f"{what} was written but does not read back: {str(e)[:200]}")


class _Info(dict):  # type: ignore[type-arg]
    """A case's report; setting ``input`` also hands it to ``announce``."""

    def __init__(self, announce: Callable[[Any], None] | None) -> None:
        super().__init__()
        self.announce = announce

    def __setitem__(self, key: str, value: Any) -> None:
        super().__setitem__(key, value)
        if key == "input" and self.announce is not None:
            self.announce(value)


class Worker:
    """Runs the cases of one category; state (seed partitions) is built on first use."""

    def __init__(
        self,
        category: str,
        seed: int,
        workdir: Path,
        extra_seeds: dict[str, str],
    ) -> None:
        self.category = category
        self.seed = seed
        self.workdir = workdir
        self.seeds = {**SEEDS, **extra_seeds}
        self._base: dict[str, Path] = {}

    def base_partition(self, name: str) -> Path:
        """A valid partition directory of seed ``name`` (made once)."""
        if name not in self._base:
            import shardwise as sw

            d = self.workdir / f"base-{name}"
            src = d.with_suffix(".mlir")
            src.write_text(self.seeds[name])
            if not (d / "p" / "meta.json").is_file():  # made by an earlier worker
                shutil.rmtree(d, ignore_errors=True)
                d.mkdir()
                sw.partition(sw.load_mlir(src), d / "p")
            self._base[name] = d / "p"
        return self._base[name]

    def run(self, i: int, d: Path, announce: Callable[[Any], None] | None = None) -> dict[str, Any]:
        """Case ``i`` in directory ``d``; ``announce`` gets its input as soon as it is made
        (so that a crash or a hang can be reported with it)."""
        rng = random.Random(f"{self.seed}/{self.category}/{i}")
        info: dict[str, Any] = _Info(announce)
        try:
            getattr(self, "case_" + self.category)(rng, d, info)
            info["status"] = "ok"
        except Problem as p:
            info["status"] = p.kind
            info["detail"] = p.detail
        return info

    # -- selftest: the driver's own check (a crash, a hang, each problem kind, a pass) -----------

    def case_selftest(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        i = int(d.name.removeprefix("case"))
        info["input"] = [["segfault", "hang", "stderr", "traceback", "ok", "data-loss"][i % 6]]
        if i % 6 == 0:
            os.kill(os.getpid(), signal.SIGSEGV)
        elif i % 6 == 1:
            time.sleep(3600)
        elif i % 6 == 2:
            check_stderr(
                CliResult(2, "", "shardwise: error: one\nshardwise: error: two\n"),
                (0, 2),
                "selftest",
            )
        elif i % 6 == 3:
            api("selftest", {}.__getitem__, "key")
        elif i % 6 == 5:
            out = d / "out.mlir"
            out.write_bytes(SENTINEL)
            (d / ".out.mlir.x1y2.tmp").write_text("")
            left = leftovers(d)
            if left:
                raise Problem("data-loss", f"temporary files left beside the output: {left}")

    # -- sharding ----------------------------------------------------------------------------

    def case_sharding(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.cli import parse_shape_arg
        from shardwise.mesh import Mesh
        from shardwise.sharding import TensorSharding

        wild = rng.random() < 0.5
        mesh_text = gen_mesh_text(rng, wild=wild)
        ok, mesh = api("Mesh.from_spec", Mesh.from_spec, mesh_text)
        axes = list(mesh.axis_names) if ok else ["x", "y"]
        text = gen_sharding_text(rng, axes, wild)
        shape_text = gen_shape_text(rng, wild)
        info["input"] = [text[:200], mesh_text[:200], shape_text]
        accepted = False
        if ok:
            ok_ts, ts = api("TensorSharding.parse", TensorSharding.parse, text, mesh)
            api("TensorSharding.parse (no mesh)", TensorSharding.parse, text)
            api(
                "TensorSharding.parse_per_value",
                TensorSharding.parse_per_value,
                "#sdy.sharding_per_value<[" + text.removeprefix("#sdy.sharding") + "]>",
                mesh,
            )
            if ok_ts:
                again = api("re-parsing a printed sharding", TensorSharding.parse, str(ts), mesh)
                if not again[0] or again[1] != ts:
                    raise Problem(
                        "wrong",
                        f"{text!r} prints as {str(ts)!r}, which parses to {again[1]!s}",
                    )
                shape: tuple[int, ...] | None = None
                if shape_text is not None:
                    ok_shape, parsed = api("parse_shape_arg", parse_shape_arg, shape_text)
                    shape = parsed if ok_shape else None
                accepted = api("validate", ts.validate, shape, meshes=mesh)[0]
                if shape is not None:
                    api("local_shape", ts.local_shape, shape, meshes=mesh)
                    api(
                        "device_ranges",
                        ts.device_ranges,
                        shape,
                        rng.choice((0, 1, mesh.size - 1, mesh.size, -1, 2**70)),
                        meshes=mesh,
                    )
                for conv in (
                    "to_hlo_sharding",
                    "to_mindspore_layout",
                    "to_hidet",
                    "to_dtensor_placements",
                    "to_mindspore_strategy",
                ):
                    ok_conv, value = api(conv, getattr(ts, conv), mesh)
                    if ok_conv and conv == "to_hlo_sharding" and ts.rank < 8 and mesh.size <= 64:
                        back = api(
                            "from_hlo_sharding",
                            TensorSharding.from_hlo_sharding,
                            value,
                            ts.rank,
                            ts.resolve_mesh(mesh),
                        )
                        if not back[0]:
                            raise Problem(
                                "wrong",
                                f"{ts} converts to HLO {value!r}, which does not convert back: {back[1]}",
                            )
                api("to_partition_spec", ts.to_partition_spec)
        self.conversions_from(rng, mesh if ok else None)
        argv = (
            ["show", f"--mesh={mesh_text}"]
            + ([f"--shape={shape_text}"] if shape_text is not None else [])
            + (["--user"] if rng.random() < 0.2 else [])
            + ["--", text]
        )
        res = cli(argv)
        info["accepted"] = accepted and res.rc == 0

    def conversions_from(self, rng: random.Random, mesh: Any) -> None:
        from shardwise.mesh import Mesh
        from shardwise.sharding import TensorSharding

        mesh = mesh if mesh is not None and 0 < mesh.size <= 64 else Mesh({"x": 2, "y": 2})
        rank = rng.choice((0, 1, 2, 3, -1, 7))
        hlo = rng.choice(
            (
                "{replicated}",
                "{maximal device=0}",
                "{devices=[2,1]0,1}",
                "{devices=[2,2]<=[4]}",
                "{devices=[2,1,2]<=[4] last_tile_dim_replicate}",
                "{devices=[2,2]<=[2,2]T(1,0)}",
                "{manual}",
                "{devices=[4,1]<=[4]}",
            )
        )
        hlo = _syntax_noise(rng, mut_number(rng, hlo) if rng.random() < 0.4 else hlo, 0.3)
        api(
            "from_hlo_sharding",
            TensorSharding.from_hlo_sharding,
            hlo,
            rank,
            mesh if rng.random() < 0.8 else None,
        )
        names = [*mesh.axis_names, "q", ""]
        spec = tuple(
            rng.choice((None, rng.choice(names), tuple(rng.sample(names, min(2, len(names))))))
            for _ in range(rng.choice((0, 1, 2, 3)))
        )
        api(
            "from_partition_spec",
            TensorSharding.from_partition_spec,
            spec,
            mesh,
            rng.choice((None, 0, 1, 2, 5)),
        )
        api(
            "from_hidet",
            TensorSharding.from_hidet,
            [set(rng.sample(range(-1, 4), rng.randrange(3))) for _ in range(rng.choice((0, 1, 2)))],
            mesh,
        )
        kinds = (
            ("shard", rng.choice((0, 1, -1, 5))),
            ("replicate",),
            ("partial", rng.choice(("sum", "max", "avg"))),
            ("bogus",),
            (),
        )
        api(
            "from_dtensor_placements",
            TensorSharding.from_dtensor_placements,
            [rng.choice(kinds) for _ in range(rng.choice((len(mesh), len(mesh), 1, 3)))],
            mesh,
            abs(rank),
        )
        dm = tuple(rng.choice((1, 2, 4, 0, -2)) for _ in range(rng.choice((1, 2, 3))))
        tm = tuple(rng.choice((-1, 0, 1, 2, 5, (0, 1), ())) for _ in range(rng.choice((1, 2))))
        api(
            "from_mindspore_layout",
            TensorSharding.from_mindspore_layout,
            dm,
            tm,
            mesh if rng.random() < 0.5 else None,
        )
        api(
            "from_mindspore_strategy",
            TensorSharding.from_mindspore_strategy,
            [rng.choice((1, 2, 3, 0, -1)) for _ in range(rng.choice((1, 2)))],
            rng.choice((1, 2, 4, 0, -4, 2**70)),
        )

    # -- mlir ---------------------------------------------------------------------------------

    def case_mlir(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        import shardwise as sw

        name = rng.choice(sorted(self.seeds))
        muts, data = mutate_mlir(rng, self.seeds[name])
        info["input"] = [name, *muts]
        src = d / "in.mlir"
        src.write_bytes(data)
        ok, module = api("load_mlir", sw.load_mlir, src)
        if ok:
            ok, out = api("propagate", sw.propagate, module)
            if ok:
                ok_text, text = api("Module.to_mlir", out.to_mlir)
                if ok_text and not api("load_mlir (re-reading to_mlir)", sw.load_mlir, text)[0]:
                    raise Problem("wrong", "the propagated module's text does not read back")
        info["accepted"] = ok
        command = rng.choice(("propagate", "propagate", "partition", "partition", "rules", "auto"))
        before = set(os.listdir(d))
        if command == "partition":
            target = d / "p"
            shutil.copytree(
                self.base_partition(name if name in SEEDS else "reduce"),
                target,
                symlinks=True,
            )
            snap = snapshot(target)
            mesh = ["--mesh", gen_mesh_text(rng)] if rng.random() < 0.25 else []
            res = cli(["partition", str(src), "-o", str(target), *mesh])
            if res.rc == 0:
                from shardwise.spmd.load import load_meta

                ok_meta, meta = api("load_meta of a written partition", load_meta, target)
                if not ok_meta:
                    raise Problem(
                        "data-loss",
                        f"partition exited 0 but wrote an unreadable directory: {meta}",
                    )
                for r in range(min(meta["num_ranks"], 4)):
                    _mlir_loads(target / f"rank{r}.mlir", f"rank{r}.mlir")
            elif snapshot(target) != snap:
                raise Problem(
                    "data-loss",
                    f"partition exited {res.rc} but changed the previous partition in -o",
                )
        else:
            out = d / "out.mlir"
            out.write_bytes(SENTINEL)
            extra: list[str] = []
            if command == "auto":
                extra = [
                    "--mesh",
                    rng.choice(("x=2", "x=2,y=2", gen_mesh_text(rng))),
                    "--time-limit",
                    "0.2",
                    "--method",
                    rng.choice(("local", "ilp", "bfs")),
                ]
            elif command == "propagate" and rng.random() < 0.2:
                extra = [
                    "--pipeline",
                    rng.choice(
                        (
                            "basic",
                            "aggressive",
                            "op-priority",
                            "builtin.module(sdy-propagation-pipeline)",
                            "bogus",
                        )
                    ),
                ]
            res = cli(
                [command, str(src), "-o", str(out), *extra],
                ok_codes=(0, 1, 2) if command == "auto" else (0, 2),
            )
            if res.rc == 2 and out.read_bytes() != SENTINEL:
                raise Problem(
                    "data-loss",
                    f"{command} exited 2 but changed the existing output file",
                )
            if res.rc in (0, 1) and command != "auto" or (command == "auto" and res.rc == 0):
                if out.read_bytes() == SENTINEL:
                    raise Problem(
                        "data-loss",
                        f"{command} exited {res.rc} but did not write its output",
                    )
                _mlir_loads(out, f"the output of {command}")
        left = leftovers(d, before)
        if left:
            raise Problem("data-loss", f"temporary files left beside the output: {left}")

    # -- iopddl -------------------------------------------------------------------------------

    def case_iopddl(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.search.iopddl import read_instance, score

        muts, raw, suffix = mutate_iopddl(rng)
        info["input"] = muts
        path = d / ("instance" + suffix)
        path.write_bytes(raw)
        ok, graph = api("read_instance", read_instance, path, io_ok=True)
        if ok:
            offsets = [int(x) for x in graph.offsets]
            ks = [b - a for a, b in itertools.pairwise(offsets)]
            assignment = [rng.randrange(k) if rng.random() < 0.95 else rng.choice((-1, k, 2**70)) for k in ks]
            api("score", score, graph, assignment)
        info["accepted"] = ok
        method = rng.choice(("auto", "auto", "ilp", "local", "local", "limited", "penalty"))
        limit = rng.choice(("0.2", "0.5", "0", "-1", "nan", "inf", "1e400"))
        res = cli(
            ["iopddl", str(path), "--time-limit", limit, "--method", method],
            ok_codes=(0, 1, 2),
        )
        lines = res.out.strip().splitlines()
        if res.rc in (0, 1):
            if not ok:
                raise Problem(
                    "wrong",
                    f"read_instance refused the instance but shardwise iopddl exited {res.rc}",
                )
            if len(lines) < 2 or not lines[-1].startswith("cost: "):
                raise Problem(
                    "wrong",
                    f"exit {res.rc} without an answer and a cost line: {res.out[-200:]!r}",
                )
            answer = json.loads(lines[-2])
            cost = lines[-1].removeprefix("cost: ")
            if len(answer) != len(ks):
                raise Problem(
                    "wrong",
                    f"an answer of {len(answer)} strategies for {len(ks)} nodes",
                )
            true = score(graph, answer)
            if (
                (res.rc == 1) != (cost == "inf")
                or (true is None) != (cost == "inf")
                or (true is not None and str(true) != cost)
            ):
                raise Problem(
                    "wrong",
                    f"exit {res.rc} with 'cost: {cost}', but the answer scores {true}",
                )
        elif ok and limit in ("0.2", "0.5") and method in ("auto", "local"):
            raise Problem(
                "wrong",
                f"read_instance accepted the instance but shardwise iopddl exited 2: {res.err.strip()[:200]}",
            )

    # -- outdir -------------------------------------------------------------------------------

    def case_outdir(self, rng: random.Random, d: Path, info: dict[str, Any]) -> None:
        from shardwise.spmd.load import (
            check_outdir,
            load_global,
            load_meta,
            load_partition,
        )

        name = rng.choice(sorted(SEEDS))
        target = d / "p"
        shutil.copytree(self.base_partition(name), target, symlinks=True)
        muts = tamper_outdir(rng, target, d.parent / f"base-{name}.mlir")
        if rng.random() < 0.2:
            try:
                muts += tamper_outdir(rng, target, d.parent / f"base-{name}.mlir")
            except (
                OSError,
                ValueError,
                RecursionError,
            ):  # the first broke what it edits
                pass
        info["input"] = [name, *muts]
        snap = snapshot(target)
        ok, meta = api("load_meta", load_meta, target, io_ok=True)
        if ok:
            for r in range(min(meta["num_ranks"], 3)):
                api(f"load_partition(rank {r})", load_partition, target, r, io_ok=True)
            api("load_global", load_global, target, io_ok=True)
            ok = api("check_outdir", check_outdir, target, io_ok=True)[0]
        info["accepted"] = ok
        res = cli(
            ["run", str(target), *(["--check"] if rng.random() < 0.5 else [])],
            ok_codes=(0, 1, 2),
        )
        if snapshot(target) != snap:
            raise Problem("data-loss", "shardwise run changed the partition directory it read")
        if rng.random() < 0.3:
            src = d.parent / f"base-{name}.mlir"
            before = set(os.listdir(d))
            res = cli(["partition", str(src), "-o", str(target)])
            if res.rc == 2 and snapshot(target) != snap:
                raise Problem(
                    "data-loss",
                    "partition refused to replace a directory but changed it",
                )
            if res.rc == 0:
                ok_meta, meta = api("load_meta after partition -o", load_meta, target)
                extra = (
                    {p.name for p in target.iterdir()}
                    - {"meta.json", "partitioned.mlir"}
                    - {f"rank{r}.mlir" for r in range(meta["num_ranks"] if ok_meta else 0)}
                )
                if not ok_meta or extra:
                    raise Problem(
                        "wrong",
                        f"partition -o over a tampered directory left it unreadable or with stale files {sorted(extra)}",
                    )
            left = leftovers(d, before)
            if left:
                raise Problem("data-loss", f"temporary files left beside the output: {left}")


def extra_seed_programs(limit_bytes: int = 4000) -> dict[str, str]:
    """The conformance corpus's small input programs (``../shared/conformance/*/*.in.mlir``
    under ``limit_bytes``), when it is there."""
    root = Path(
        os.environ.get(
            "SHARDWISE_CONFORMANCE",
            Path(__file__).resolve().parents[3] / "shared" / "conformance",
        )
    )
    if not root.is_dir():
        return {}
    return {
        f"corpus:{p.name.removesuffix('.in.mlir')}": p.read_text()
        for p in sorted(root.glob("*/*.in.mlir"))
        if p.stat().st_size <= limit_bytes
    }


def worker_main(argv: list[str]) -> int:
    """``faults.py --worker CATEGORY SEED START STOP WORKDIR [--corpus]``: runs cases START..STOP-1
    and writes ``start I`` and ``done JSON`` lines to the original stdout; the process's own
    stdout (fd 1) goes to stderr so that native code cannot corrupt the protocol."""
    category, seed, start, stop, workdir = (
        argv[0],
        int(argv[1]),
        int(argv[2]),
        int(argv[3]),
        Path(argv[4]),
    )
    proto = os.fdopen(os.dup(1), "w", buffering=1)
    os.dup2(2, 1)
    sys.stdout = sys.__stdout__ = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
    import warnings

    warnings.simplefilter("ignore")
    worker = Worker(
        category,
        seed,
        workdir,
        extra_seed_programs() if "--corpus" in argv else {},
    )
    for i in range(start, stop):
        proto.write(f"start {i}\n")
        d = workdir / f"case{i}"
        d.mkdir(exist_ok=True)
        t = time.perf_counter()
        info = worker.run(
            i,
            d,
            lambda inp: proto.write("input " + json.dumps(inp, default=str) + "\n"),
        )
        info["i"] = i
        info["seconds"] = round(time.perf_counter() - t, 3)
        proto.write("done " + json.dumps(info, default=str) + "\n")
        if info["status"] == "ok":
            shutil.rmtree(d, ignore_errors=True)
    return 0


# ---------------------------------------------------------------------------------------------
# The driver (in the test or benchmark process).


_EXEC_LIMITED = (
    "import os, resource, sys; n = int(sys.argv[1]); "
    "resource.setrlimit(resource.RLIMIT_AS, (n, n)); os.execv(sys.argv[2], sys.argv[2:])"
)


def limited(cmd: Sequence[str | bytes], limit: int = MEMORY_LIMIT) -> list[str | bytes]:
    """``cmd`` (its first item an executable path) run with ``RLIMIT_AS`` = ``limit`` bytes:
    a small Python process sets the limit and execs it (same pid). Not a ``preexec_fn``: that
    makes ``subprocess`` fork with Python's at-fork hooks, and JAX's (registered once a test
    has used a JAX backend) warns that forking a multithreaded process may deadlock."""
    return [sys.executable, "-c", _EXEC_LIMITED, str(limit), *cmd]


@dataclass
class Outcome:
    """One case: its category and index, what was done to the input, its status (``ok`` or a
    ``PROBLEMS`` entry), a detail for a problem, whether the input was accepted, seconds."""

    category: str
    i: int
    status: str
    input: list[Any] = field(default_factory=list)
    detail: str = ""
    accepted: bool = False
    seconds: float = 0.0

    @property
    def replay(self) -> str:
        return f"python tests/python/faults.py --replay {self.category} SEED {self.i}"


def run_cases(
    category: str,
    seed: int,
    count: int,
    workdir: Path,
    *,
    start: int = 0,
    case_timeout: float = 60.0,
    memory: int = MEMORY_LIMIT,
    corpus: bool = False,
    startup_grace: float = 30.0,
    progress: Callable[[Outcome], None] | None = None,
) -> list[Outcome]:
    """Runs cases ``start..start+count-1`` of ``category`` in worker processes under
    ``RLIMIT_AS = memory``; a worker that dies or exceeds ``case_timeout`` seconds on one case
    makes that case a ``crash`` or a ``hang`` and a new worker goes on with the next."""
    workdir.mkdir(parents=True, exist_ok=True)
    outcomes: list[Outcome] = []
    i, stop = start, start + count
    while i < stop:
        errlog = workdir / f"worker{i}.stderr"
        with open(errlog, "wb") as err:
            cmd = [
                sys.executable,
                __file__,
                "--worker",
                category,
                str(seed),
                str(i),
                str(stop),
                str(workdir),
                *(["--corpus"] if corpus else []),
            ]
            env = dict(
                os.environ,
                PYTHONFAULTHANDLER="1",
                XLA_FLAGS="--xla_force_host_platform_device_count=8",
            )
            proc = subprocess.Popen(
                limited(cmd, memory),
                stdout=subprocess.PIPE,
                stderr=err,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        try:
            status, current, current_input = _read_worker(
                proc, i, case_timeout, startup_grace, category, outcomes, progress
            )
        except BaseException:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)  # a worker never outlives the driver
            proc.wait()
            raise
        if status == "hang":
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        assert proc.stdout is not None
        proc.stdout.close()
        if current is None and status == "crash" and proc.returncode == 0:
            errlog.unlink(missing_ok=True)
            break  # finished
        tail = errlog.read_text(errors="replace")[-600:]
        failed = current if current is not None else i
        how = f"killed by signal {-proc.returncode}" if proc.returncode < 0 else f"exit status {proc.returncode}"
        if status == "hang":
            detail = f"no answer within {case_timeout:g} s"
        else:
            detail = f"worker {how}; stderr: {tail!r}"
        o = Outcome(
            category,
            failed,
            status or "crash",
            current_input if current is not None else [],
            detail,
        )
        outcomes.append(o)
        if progress is not None:
            progress(o)
        shutil.rmtree(workdir / f"case{failed}", ignore_errors=True)
        i = failed + 1
        errlog.unlink(missing_ok=True)
    return outcomes


def _read_worker(
    proc: subprocess.Popen[bytes],
    i: int,
    case_timeout: float,
    startup_grace: float,
    category: str,
    outcomes: list[Outcome],
    progress: Callable[[Outcome], None] | None,
) -> tuple[str, int | None, list[Any]]:
    """Reads a worker's reports until it ends (``crash``, also for a normal end) or a case
    runs past its time (``hang``); returns that, the case under way and its input."""
    assert proc.stdout is not None
    buf = b""
    current: int | None = None
    current_input: list[Any] = []
    deadline = time.monotonic() + case_timeout + startup_grace  # the first case also imports jax
    fd = proc.stdout.fileno()
    status: str | None = None
    while True:
        remaining = deadline - time.monotonic()
        ready, _, _ = select.select([fd], [], [], max(remaining, 0))
        if not ready:
            status = "hang"
            break
        chunk = os.read(fd, 65536)
        if not chunk:
            status = "crash"
            break
        buf += chunk
        while b"\n" in buf:
            line, buf = buf.split(b"\n", 1)
            kind, _, rest = line.decode().partition(" ")
            if kind == "input":
                current_input = json.loads(rest)
            elif kind == "start":
                current = int(rest)
                current_input = []
                deadline = time.monotonic() + case_timeout + (startup_grace if current == i else 0)
            elif kind == "done":
                info = json.loads(rest)
                o = Outcome(
                    category,
                    info["i"],
                    info["status"],
                    info.get("input", []),
                    info.get("detail", ""),
                    bool(info.get("accepted")),
                    info["seconds"],
                )
                outcomes.append(o)
                if progress is not None:
                    progress(o)
                current = None
    return status or "crash", current, current_input


def summarize(outcomes: Sequence[Outcome]) -> dict[str, dict[str, int]]:
    """Per category: ``tried``, ``accepted`` and the count of each problem kind."""
    table: dict[str, dict[str, int]] = {}
    for o in outcomes:
        row = table.setdefault(o.category, {"tried": 0, "accepted": 0, **dict.fromkeys(PROBLEMS, 0)})
        row["tried"] += 1
        row["accepted"] += o.accepted
        if o.status != "ok":
            row[o.status] = row.get(o.status, 0) + 1
    return table


def problems(outcomes: Sequence[Outcome]) -> list[Outcome]:
    return [o for o in outcomes if o.status != "ok"]


def describe(o: Outcome, seed: int) -> str:
    return f"[{o.category} #{o.i} {o.status}] input {o.input}: {o.detail} (replay: python tests/python/faults.py --replay {o.category} {seed} {o.i})"


# ---------------------------------------------------------------------------------------------
# Signals: SIGINT and SIGTERM at a chosen time into a command.

#: The commands of the signal trials, each with about how many seconds of work follow the start
#: of ``main`` (the window the signal's time is drawn from).
SIGNAL_COMMANDS = {"propagate": 1.5, "partition": 2.0, "iopddl": 2.5, "launch": 4.0}
_MARK = "SHARDWISE_FAULTS_MARK"


def cli_env(tmpdir: Path, mark: str = "") -> dict[str, str]:
    """The environment of a ``shardwise`` subprocess: ``TMPDIR`` (checked for leftovers), a
    wide terminal, and ``mark`` in ``SHARDWISE_FAULTS_MARK`` (inherited by every descendant,
    so that leftover processes can be found)."""
    env = dict(
        os.environ,
        TMPDIR=str(tmpdir),
        COLUMNS="200",
        XLA_FLAGS="--xla_force_host_platform_device_count=8",
        PYTHONFAULTHANDLER="1",
    )
    env.pop("PYTEST_CURRENT_TEST", None)
    if mark:
        env[_MARK] = mark
    return env


def marked_pids(mark: str) -> list[int]:
    """Live (not zombie) processes whose environment holds ``SHARDWISE_FAULTS_MARK=mark``."""
    needle = f"{_MARK}={mark}".encode() + b"\0"
    pids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == os.getpid():
            continue
        try:
            if (
                needle in (entry / "environ").read_bytes() + b"\0"
                and (entry / "stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
            ):
                pids.append(int(entry.name))
        except OSError:
            continue
    return pids


def sigterm_caught(pid: int) -> bool:
    """Whether process ``pid`` has a handler for SIGTERM (``shardwise.cli.main`` installs one
    first thing): the signal trials start their clock there, not during Python's start-up,
    where SIGINT and SIGTERM end any Python program by their default action."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("SigCgt:"):
                return bool(int(line.split()[1], 16) & (1 << (signal.SIGTERM - 1)))
    except OSError:
        pass
    return False


@dataclass
class SignalTrial:
    """One command signalled once: what came back and what was wrong (``problems``)."""

    command: str
    signal: str
    delay: float
    sent: bool = False
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)

    def __str__(self) -> str:
        return f"{self.command} + {self.signal} at {self.delay:.2f} s (sent: {self.sent}): exit {self.returncode}; problems {self.problems}; stderr {self.stderr[-400:]!r}"


def prepare_signal_inputs(d: Path) -> dict[str, Path]:
    """The inputs of the signal trials in ``d``: a program, a partition of it, an instance."""
    import shardwise as sw

    d.mkdir(parents=True, exist_ok=True)
    src = d / "in.mlir"
    src.write_text(SEEDS["dot"])
    part = d / "part"  # two ranks, for launch -n 2
    if not (part / "meta.json").is_file():
        sw.partition(sw.load_mlir(SEEDS["reduce"]), part)
    inst = d / "chain.json"
    n = 3000
    inst.write_text(
        json.dumps(
            {
                "problem": {
                    "name": "chain",
                    "nodes": {
                        "intervals": [[i, i + 3] for i in range(n)],
                        "costs": [[(i * 7 + k * 3) % 11 for k in range(4)] for i in range(n)],
                        "usages": [[1 + k for k in range(4)] for _ in range(n)],
                    },
                    "edges": {
                        "nodes": [[i, i + 1] for i in range(n - 1)],
                        "costs": [[(i + a * 5 + b) % 13 for a in range(4) for b in range(4)] for i in range(n - 1)],
                    },
                    "usage_limit": 3 * n,
                }
            }
        )
    )
    return {"in": src, "part": part, "instance": inst}


def signal_trial(
    command: str,
    sig: signal.Signals,
    delay: float,
    inputs: dict[str, Path],
    work: Path,
    *,
    timeout: float = 120.0,
    memory: int = MEMORY_LIMIT,
    program: Sequence[str] | None = None,
    grace: float = 10.0,
) -> SignalTrial:
    """Runs ``shardwise COMMAND`` (under ``RLIMIT_AS``), sends ``sig`` ``delay`` seconds after
    its ``main`` started, and checks: an exit status of 0 (done before the signal), 1 (an
    iopddl answer over the usage limit), 130 (SIGINT: with ``shardwise: interrupted``), 143
    (SIGTERM) or 2 with one error line; killed by the signal itself only after its work was
    done (the interpreter's teardown, its output complete); no traceback; the output either
    untouched or complete; no temporary file beside it or in ``TMPDIR``; no process of the
    command's left. ``program``: run this instead of ``python -m shardwise ...`` (the
    suite's check of its own checks); ``grace``: seconds its processes get to end after it
    exits."""
    import uuid

    work.mkdir(parents=True, exist_ok=True)
    tmpdir = work / "tmp"
    tmpdir.mkdir()
    outdir = work / "out"
    outdir.mkdir()
    mark = uuid.uuid4().hex
    trial = SignalTrial(command, sig.name, delay)
    out_file = outdir / "out.mlir"
    out_part = outdir / "p"
    if command == "propagate":
        out_file.write_bytes(SENTINEL)
        argv = ["propagate", str(inputs["in"]), "-o", str(out_file)]
    elif command == "partition":
        import shardwise as sw

        sw.partition(sw.load_mlir(inputs["in"]), out_part)  # a previous partition, to be replaced
        argv = ["partition", str(inputs["in"]), "-o", str(out_part)]
    elif command == "iopddl":
        argv = [
            "iopddl",
            str(inputs["instance"]),
            "--time-limit",
            "5",
            "--method",
            "local",
        ]
    else:
        argv = ["launch", "-n", "2", str(inputs["part"]), "--backend", "mpi"]
    before = snapshot(out_part) if command == "partition" else None
    t0 = time.monotonic()
    proc = subprocess.Popen(
        limited(list(program) if program is not None else [sys.executable, "-m", "shardwise", *argv], memory),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=cli_env(tmpdir, mark),
        cwd=work,
    )
    try:
        while proc.poll() is None and not sigterm_caught(proc.pid) and time.monotonic() - t0 < timeout:
            time.sleep(0.005)
        time.sleep(delay)
        if proc.poll() is None:
            proc.send_signal(sig)
            trial.sent = True
        trial.stdout, trial.stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.kill(proc.pid, signal.SIGKILL)
        trial.stdout, trial.stderr = proc.communicate()
        trial.problems.append(f"hang: no exit within {timeout:g} s")
    trial.seconds = time.monotonic() - t0
    rc = trial.returncode = proc.returncode
    p = trial.problems
    done = _work_done(command, trial.stdout, out_file, out_part)
    if "Traceback (most recent call last)" in trial.stderr or "Fatal Python error" in trial.stderr:
        p.append("traceback on stderr")
    if rc == 2:
        lines = [ln for ln in trial.stderr.splitlines() if ln.strip() and not ln.startswith("shardwise: warning: ")]
        if len(lines) != 1 or not lines[0].startswith("shardwise: error: "):
            p.append("exit 2 without exactly one error line")
    elif rc == 130:
        if sig != signal.SIGINT:
            p.append("exit 130 for SIGTERM")
        elif not trial.stderr.strip().splitlines()[-1:] or not trial.stderr.strip().splitlines()[-1].startswith(
            "shardwise: interrupted"
        ):
            p.append("exit 130 without 'shardwise: interrupted'")
    elif rc == 143:
        if sig != signal.SIGTERM:
            p.append("exit 143 for SIGINT")
    elif rc in (0, 1):
        if rc == 1 and command != "iopddl":
            p.append("exit 1")
        if not done:
            p.append(f"exit {rc} but the work is not complete")
    elif rc == -sig:
        if not done:
            p.append(f"killed by {sig.name} before its work was done (the signal was not handled)")
    else:
        p.append(f"exit status {rc}")
    if command == "propagate" and out_file.read_bytes() != SENTINEL and not done:
        p.append("the output file was changed but is not complete")
    if command == "partition" and snapshot(out_part) != before and not done:
        p.append("the previous partition was changed but the new one is not complete")
    left = leftovers(outdir) + [f"TMPDIR/{n}" for n in os.listdir(tmpdir)]
    if left:
        p.append(f"leftovers {left}")
    deadline = time.monotonic() + grace  # processes of the command may still be ending
    while marked_pids(mark) and time.monotonic() < deadline:
        time.sleep(0.1)
    alive = marked_pids(mark)
    if alive:
        p.append(f"processes left: {alive}")
        for pid in alive:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
    return trial


def _work_done(command: str, stdout: str, out_file: Path, out_part: Path) -> bool:
    """Whether the command finished its work: its closing line on stdout and a complete
    output."""
    if command == "propagate":
        return "propagated" in stdout and out_file.read_bytes().startswith(b"module")
    if command == "partition":
        ranks = sorted(out_part.glob("rank*.mlir")) if out_part.is_dir() else []
        return "wrote" in stdout and (out_part / "meta.json").is_file() and len(ranks) == 4
    if command == "iopddl":
        return stdout.rstrip().splitlines()[-1:] != [] and stdout.rstrip().splitlines()[-1].startswith("cost: ")
    return "ranks (mpi)" in stdout


def _replay(argv: list[str]) -> int:
    """``faults.py --replay CATEGORY SEED I``: runs one case in this process and prints it."""
    category, seed, i = argv[0], int(argv[1]), int(argv[2])
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp) / f"case{i}"
        d.mkdir()
        info = Worker(
            category,
            seed,
            Path(tmp),
            extra_seed_programs() if "--corpus" in argv else {},
        ).run(i, d)
    print(json.dumps(info, indent=1, default=str))
    return 0 if info["status"] == "ok" else 1


if __name__ == "__main__":
    if sys.argv[1:2] == ["--worker"]:
        sys.exit(worker_main(sys.argv[2:]))
    if sys.argv[1:2] == ["--replay"]:
        sys.exit(_replay(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)
