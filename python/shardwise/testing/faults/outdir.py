"""Outputs and partition directories for the fault corpus (``shardwise.testing.faults``): the
tampering of a valid partition directory (``tamper_outdir``: ``meta.json`` edits, missing, extra
or swapped rank files, symbolic links, FIFOs, non-UTF-8), and the checks that outputs are safe:
``SENTINEL`` (an existing output that a failed command must keep), ``snapshot`` (a directory's
contents, to compare before and after) and ``leftovers`` (temporary files of an atomic write)."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import stat
from pathlib import Path
from typing import Any

from shardwise.testing.faults.instances import mutate_json
from shardwise.testing.faults.mutate import mutate_mlir

#: The bytes an existing output holds before a command that must not change it on failure.
SENTINEL = b"// the user's previous output: must survive a failed command\n"


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
        text = _regular(meta_path).read_text()
        meta_path.write_text(text.replace('"x"', '"q"').replace("2", rng.choice(("3", "0", "99999999999999999999"))))
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
