"""IOPDDL instances for the fault corpus (``shardwise.testing.faults``): random valid ones
(``gen_instance``), structural mutations of decoded JSON (``mutate_json``; also of partition
directories' ``meta.json``) and broken instance files (``mutate_iopddl``: mutated JSON, truncated
or flipped bytes, deep nesting, non-JSON, huge shapes, broken gzip)."""

from __future__ import annotations

import gzip
import json
import random
from collections.abc import Iterator
from typing import Any

from shardwise.testing.faults.mutate import HUGE_INTS, mut_flip
from shardwise.testing.iopddl import EXAMPLE as IOPDDL_EXAMPLE  # the contest's example instance


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
