"""Small parsers for the MLIR attribute texts the rules read (as jaxlib prints them with
``str(attr)``); no jaxlib needed.

Every function takes the op (for error messages) and the attribute name, and raises
``OpInfoError`` naming the op, the attribute, what was expected and what was got when the
attribute is missing (unless a default is given) or malformed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from shardwise.rules.exceptions import OpInfoError
from shardwise.rules.opinfo import OpInfo

__all__ = [
    "ConvDims",
    "attr_bool",
    "attr_conv_dims",
    "attr_dense_ints",
    "attr_enum",
    "attr_int",
    "attr_ints",
    "attr_string",
    "attr_struct",
    "parse_string",
]


def _bad(op: OpInfo, name: str, expected: str, text: str) -> OpInfoError:
    return OpInfoError(f"{op.name}: attribute {name!r}: expected {expected}, got {text!r}")


def _text(op: OpInfo, name: str) -> str | None:
    return op.attributes.get(name)


def _required(op: OpInfo, name: str, expected: str) -> str:
    text = op.attributes.get(name)
    if text is None:
        known = ", ".join(sorted(op.attributes)) or "none"
        raise OpInfoError(f"{op.name}: missing attribute {name!r} ({expected}); attributes present: {known}")
    return text


_INT = re.compile(r"\s*(-?\d+)\s*(?::\s*[a-z]+\d*\s*)?$")


def attr_int(op: OpInfo, name: str, default: int | None = None) -> int:
    """``1 : i64`` (or a bare ``1``)."""
    text = _text(op, name)
    if text is None:
        if default is not None:
            return default
        text = _required(op, name, "an integer such as '1 : i64'")
    m = _INT.match(text)
    if not m:
        raise _bad(op, name, "an integer such as '1 : i64'", text)
    return int(m.group(1))


def attr_bool(op: OpInfo, name: str, default: bool | None = None) -> bool:
    """``true`` / ``false`` (a missing optional attribute is ``default``)."""
    text = _text(op, name)
    if text is None:
        if default is not None:
            return default
        text = _required(op, name, "'true' or 'false'")
    t = text.strip()
    if t in ("true", "false"):
        return t == "true"
    raise _bad(op, name, "'true' or 'false'", text)


def _int_list(text: str) -> tuple[int, ...] | None:
    body = text.strip()
    if not body:
        return ()
    try:
        return tuple(int(x) for x in body.split(","))
    except ValueError:
        return None


_ARRAY = re.compile(r"\s*array<\s*i\d+\s*(?::(.*))?>\s*$", re.DOTALL)


def attr_ints(op: OpInfo, name: str, default: tuple[int, ...] | None = None) -> tuple[int, ...]:
    """A list of integers: ``array<i64: 1, 0>``, ``array<i64>`` (empty), or a 1-D
    ``dense<[1, 0]> : tensor<2xi64>``."""
    text = _text(op, name)
    if text is None:
        if default is not None:
            return default
        text = _required(op, name, "an integer array such as 'array<i64: 1, 0>'")
    m = _ARRAY.match(text)
    if m:
        values = _int_list(m.group(1) or "")
        if values is not None:
            return values
    elif text.lstrip().startswith("dense<"):
        return attr_dense_ints(op, name)[1]
    raise _bad(op, name, "an integer array such as 'array<i64: 1, 0>'", text)


_DENSE = re.compile(r"\s*dense<(.*)>\s*:\s*tensor<([0-9x]*?)x?([a-z]+)(\d+)>\s*$", re.DOTALL)


def attr_dense_ints(op: OpInfo, name: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """An integer elements attribute ``dense<...> : tensor<4x2xi64>``: (shape, row-major flat
    values). Splats (``dense<0>``), nested lists and hex (``dense<"0x...">``) forms."""
    text = _required(op, name, "integer elements such as 'dense<0> : tensor<2x2xi64>'")
    m = _DENSE.match(text)
    if not m:
        raise _bad(op, name, "integer elements such as 'dense<0> : tensor<2x2xi64>'", text)
    body, dims, elt, bits_text = m.groups()
    shape = tuple(int(d) for d in dims.split("x") if d) if dims else ()
    count = 1
    for d in shape:
        count *= d
    body = body.strip()
    if body.startswith('"0x'):
        raw = bytes.fromhex(body[3:-1])
        width = max(1, int(bits_text) // 8)
        signed = elt == "i" or elt == "si"
        values = [int.from_bytes(raw[i : i + width], "little", signed=signed) for i in range(0, len(raw), width)]
        if len(values) == 1 and count != 1:
            values = values * count
        flat: tuple[int, ...] | None = tuple(values)
    else:
        flat = _int_list(body.replace("[", "").replace("]", ""))
        if flat is not None and len(flat) == 1 and count != 1 and "[" not in body:
            flat = flat * count
    if flat is None or len(flat) != count:
        raise _bad(op, name, f"{count} integers for shape {list(shape)}", text)
    return shape, flat


def parse_string(text: str) -> str | None:
    """An MLIR string literal ``"..."`` with ``\\\\``, ``\\"``, ``\\n``, ``\\t`` and ``\\XX``
    escapes, or None when ``text`` is not one."""
    t = text.strip()
    if len(t) < 2 or t[0] != '"' or t[-1] != '"':
        return None
    out = bytearray()
    i, body = 0, t[1:-1].encode()
    while i < len(body):
        c = body[i]
        if c == ord("\\"):
            nxt = body[i + 1 : i + 2]
            if nxt in (b"\\", b'"'):
                out += nxt
                i += 2
            elif nxt == b"n":
                out += b"\n"
                i += 2
            elif nxt == b"t":
                out += b"\t"
                i += 2
            else:
                try:
                    out.append(int(body[i + 1 : i + 3].decode(), 16))
                except ValueError:
                    return None
                i += 3
        elif c == ord('"'):
            return None
        else:
            out.append(c)
            i += 1
    try:
        return out.decode()
    except UnicodeDecodeError:
        return None


def attr_string(op: OpInfo, name: str, default: str | None = None) -> str:
    """A string attribute ``"text"``."""
    text = _text(op, name)
    if text is None:
        if default is not None:
            return default
        text = _required(op, name, "a string such as '\"name\"'")
    s = parse_string(text)
    if s is None:
        raise _bad(op, name, "a string such as '\"name\"'", text)
    return s


def attr_enum(op: OpInfo, name: str, default: str | None = None) -> str:
    """The case of an enum attribute ``#stablehlo<transpose NO_TRANSPOSE>`` ->
    ``"NO_TRANSPOSE"``."""
    text = _text(op, name)
    if text is None:
        if default is not None:
            return default
        text = _required(op, name, "an enum such as '#stablehlo<transpose NO_TRANSPOSE>'")
    m = re.match(r"\s*#\w+<\s*\w+\s+(\w+)\s*>\s*$", text)
    if not m:
        raise _bad(op, name, "an enum such as '#stablehlo<transpose NO_TRANSPOSE>'", text)
    return m.group(1)


_FIELD = re.compile(r"\s*(\w+)\s*=\s*(\[[^\]]*\]|-?\d+)\s*(,|$)")


def attr_struct(op: OpInfo, name: str, mnemonic: str) -> dict[str, tuple[int, ...] | int]:
    """The fields of a struct attribute such as ``#stablehlo.dot<lhs_contracting_dimensions =
    [1], rhs_contracting_dimensions = [0]>`` (``mnemonic`` ``"dot"``): lists become tuples,
    integers ints; absent fields are absent (empty lists are not printed)."""
    text = _required(op, name, f"'#stablehlo.{mnemonic}<...>'")
    t = text.strip()
    prefix = f"#stablehlo.{mnemonic}<"
    if not t.startswith(prefix) or not t.endswith(">"):
        raise _bad(op, name, f"'{prefix}...>'", text)
    body = t[len(prefix) : -1]
    out: dict[str, tuple[int, ...] | int] = {}
    pos = 0
    while pos < len(body) and body[pos:].strip():
        m = _FIELD.match(body, pos)
        if not m:
            raise _bad(op, name, f"fields 'name = [..]' or 'name = n' in '{prefix}...>'", text)
        key, value = m.group(1), m.group(2)
        if value.startswith("["):
            values = _int_list(value[1:-1])
            if values is None:
                raise _bad(op, name, f"integers in field {key!r}", text)
            out[key] = values
        else:
            out[key] = int(value)
        pos = m.end()
    return out


def struct_list(fields: dict[str, tuple[int, ...] | int], key: str) -> tuple[int, ...]:
    v = fields.get(key, ())
    return v if isinstance(v, tuple) else (v,)


def struct_int(
    op: OpInfo, name: str, fields: dict[str, tuple[int, ...] | int], key: str, default: int | None = None
) -> int:
    v = fields.get(key, default)
    if not isinstance(v, int):
        raise OpInfoError(f"{op.name}: attribute {name!r}: expected an integer field {key!r}, got {v!r}")
    return v


@dataclass(frozen=True)
class ConvDims:
    """``#stablehlo.conv<...>`` dimension numbers."""

    input_batch: int
    input_feature: int
    input_spatial: tuple[int, ...]
    kernel_input_feature: int
    kernel_output_feature: int
    kernel_spatial: tuple[int, ...]
    output_batch: int
    output_feature: int
    output_spatial: tuple[int, ...]


def _conv_part(part: str, a: str, b: str) -> tuple[int, int, tuple[int, ...]] | None:
    items = [x.strip() for x in part.strip()[1:-1].split(",")]
    if not part.strip().startswith("[") or not part.strip().endswith("]"):
        return None
    pa = pb = -1
    spatial: dict[int, int] = {}
    for pos, item in enumerate(items):
        if item == a:
            pa = pos
        elif item == b:
            pb = pos
        elif item.isdigit():
            spatial[int(item)] = pos
        else:
            return None
    if pa < 0 or pb < 0 or sorted(spatial) != list(range(len(spatial))):
        return None
    return pa, pb, tuple(spatial[k] for k in range(len(spatial)))


def attr_conv_dims(op: OpInfo, name: str = "dimension_numbers") -> ConvDims:
    """The compact ``#stablehlo.conv<[b, 0, 1, f]x[0, 1, i, o]->[b, 0, 1, f]>`` or the
    ``#stablehlo.conv<raw input_batch_dimension = 0, ...>`` form."""
    text = _required(op, name, "'#stablehlo.conv<...>'")
    t = text.strip()
    expected = "'#stablehlo.conv<[b, 0, f]x[0, i, o]->[b, 0, f]>' or the 'raw' form"
    if not t.startswith("#stablehlo.conv<") or not t.endswith(">"):
        raise _bad(op, name, expected, text)
    body = t[len("#stablehlo.conv<") : -1].strip()
    if body.startswith("raw"):
        fields = attr_struct(OpInfo(op.name, attributes={name: "#stablehlo.raw<" + body[3:] + ">"}), name, "raw")
        try:
            return ConvDims(
                struct_int(op, name, fields, "input_batch_dimension"),
                struct_int(op, name, fields, "input_feature_dimension"),
                struct_list(fields, "input_spatial_dimensions"),
                struct_int(op, name, fields, "kernel_input_feature_dimension"),
                struct_int(op, name, fields, "kernel_output_feature_dimension"),
                struct_list(fields, "kernel_spatial_dimensions"),
                struct_int(op, name, fields, "output_batch_dimension"),
                struct_int(op, name, fields, "output_feature_dimension"),
                struct_list(fields, "output_spatial_dimensions"),
            )
        except OpInfoError:
            raise _bad(op, name, expected, text) from None
    m = re.match(r"(\[[^\]]*\])\s*x\s*(\[[^\]]*\])\s*->\s*(\[[^\]]*\])$", body)
    if not m:
        raise _bad(op, name, expected, text)
    lhs = _conv_part(m.group(1), "b", "f")
    rhs = _conv_part(m.group(2), "i", "o")
    out = _conv_part(m.group(3), "b", "f")
    if lhs is None or rhs is None or out is None:
        raise _bad(op, name, expected, text)
    return ConvDims(lhs[0], lhs[1], lhs[2], rhs[0], rhs[1], rhs[2], out[0], out[1], out[2])
