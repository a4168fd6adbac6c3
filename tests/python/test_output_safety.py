"""Outputs go only where the user asked and destroy nothing else (issue 25, "Output safety"):
``shardwise partition -o DIR`` never removes a directory of the user's, ``-o .`` is refused,
file outputs write through devices, FIFOs and symbolic links instead of replacing them, keep
their permissions, and a partition directory gets ordinary permissions. Each test failed
before."""

from __future__ import annotations

import os
import stat
import threading
from pathlib import Path

import pytest
import shardwise as sw
from shardwise.cli import main
from shardwise.files import write_atomic
from shardwise.testing.programs import nested_cases


def _module_file(tmp_path: Path) -> Path:
    b = sw.Builder(sw.Mesh({"x": 2}))
    x = b.arg((4, 4), sharding=b.sharding([["x"], None]))
    src = tmp_path / "in.mlir"
    b.ret(b.negate(x)).save(str(src))
    return src


def _leftovers(d: Path) -> list[str]:
    return sorted(p.name for p in d.iterdir() if p.name.startswith("."))


def test_partition_refuses_a_directory_of_the_users_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _module_file(tmp_path)
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("years of work")
    assert main(["partition", str(src), "-o", str(mine)]) == 2
    err = capsys.readouterr().err
    assert "not a previous partition" in err and err.strip().count("\n") == 0
    assert (mine / "thesis.tex").read_text() == "years of work"
    assert _leftovers(tmp_path) == []
    assert main(["partition", str(src), "-o", str(mine), "--force"]) == 0  # asked for
    assert not (mine / "thesis.tex").exists() and (mine / "meta.json").is_file()


@pytest.mark.parametrize("meta", ["fifo", "deep", "device"])
def test_a_meta_json_that_is_not_a_partitions_is_refused_without_reading_it_whole(
    meta: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # Before: a FIFO named meta.json hung partition, deep JSON raised RecursionError and a
    # link to /dev/zero read until MemoryError (found by the fault campaign).
    src = _module_file(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    if meta == "fifo":
        os.mkfifo(out / "meta.json")
    elif meta == "deep":
        (out / "meta.json").write_text("[" * 100_000 + "]" * 100_000)
    else:
        (out / "meta.json").symlink_to("/dev/zero")
    assert main(["partition", str(src), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not a previous partition" in err and err.strip().count("\n") == 0


def test_partition_refuses_a_file_and_replaces_a_previous_partition(tmp_path: Path) -> None:
    src = _module_file(tmp_path)
    f = tmp_path / "notes.txt"
    f.write_text("keep")
    assert main(["partition", str(src), "-o", str(f)]) == 2
    assert f.read_text() == "keep"
    out = tmp_path / "p"
    assert main(["partition", str(src), "-o", str(out)]) == 0
    first = (out / "meta.json").stat().st_ino
    assert main(["partition", str(src), "-o", str(out)]) == 0  # a previous partition: replaced
    assert (out / "meta.json").stat().st_ino != first
    assert _leftovers(tmp_path) == []
    empty = tmp_path / "empty"
    empty.mkdir()
    assert main(["partition", str(src), "-o", str(empty)]) == 0


def test_partition_never_replaces_the_current_directory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    src = _module_file(tmp_path)
    work = tmp_path / "work"
    work.mkdir()
    (work / "data.bin").write_bytes(b"\x00" * 16)
    monkeypatch.chdir(work)
    for target in (".", str(work), str(tmp_path)):
        assert main(["partition", str(src), "-o", target, "--force"]) == 2
    assert (work / "data.bin").exists() and _leftovers(work) == [] and _leftovers(tmp_path) == []


def test_partition_directory_has_ordinary_permissions(tmp_path: Path) -> None:
    src = _module_file(tmp_path)
    old = os.umask(0o022)
    try:
        assert main(["partition", str(src), "-o", str(tmp_path / "p")]) == 0
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "p").stat().st_mode) == 0o755


def test_write_through_a_fifo_instead_of_replacing_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    write_atomic(fifo, "through the pipe")
    reader.join(10)
    assert got == [b"through the pipe"]
    assert stat.S_ISFIFO(fifo.lstat().st_mode)


def test_write_through_a_character_device(tmp_path: Path) -> None:
    devnull = Path(os.devnull)
    before = devnull.stat()
    write_atomic(devnull, "nothing")
    after = devnull.stat()
    assert stat.S_ISCHR(after.st_mode) and (after.st_ino, after.st_rdev) == (before.st_ino, before.st_rdev)


def test_symlink_target_is_written_and_the_link_kept(tmp_path: Path) -> None:
    real = tmp_path / "real.mlir"
    real.write_text("old")
    link = tmp_path / "link.mlir"
    link.symlink_to(real)
    write_atomic(link, "new")
    assert link.is_symlink() and real.read_text() == "new"


def test_existing_file_keeps_its_mode_and_new_files_follow_the_umask(tmp_path: Path) -> None:
    f = tmp_path / "out.mlir"
    f.write_text("x")
    f.chmod(0o640)
    write_atomic(f, "y")
    assert stat.S_IMODE(f.stat().st_mode) == 0o640 and f.read_text() == "y"
    old = os.umask(0o027)
    try:
        write_atomic(tmp_path / "new.mlir", "z")
        assert os.umask(0o027) == 0o027  # the umask was not changed by the write
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "new.mlir").stat().st_mode) == 0o640


def test_writing_onto_a_directory_is_one_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    src = _module_file(tmp_path)
    (tmp_path / "d").mkdir()
    assert main(["propagate", str(src), "-o", str(tmp_path / "d")]) == 2
    assert "is a directory" in capsys.readouterr().err
    assert (tmp_path / "d").is_dir() and _leftovers(tmp_path / "d") == []


def test_partition_and_run_a_module_without_main(tmp_path: Path) -> None:
    """A module whose one public function is not called @main partitions and runs (a
    KeyError traceback before); several candidates are named in one line."""
    src = tmp_path / "f.mlir"
    src.write_text(
        """sdy.mesh @mesh = <["x"=2]>
func.func @f(%arg0: tensor<8xf32> {sdy.sharding = #sdy.sharding<@mesh, [{"x"}]>}) -> tensor<8xf32> {
  %0 = stablehlo.negate %arg0 : tensor<8xf32>
  return %0 : tensor<8xf32>
}
"""
    )
    assert main(["partition", str(src), "-o", str(tmp_path / "p")]) == 0
    assert main(["run", str(tmp_path / "p"), "--check"]) == 0
    two = src.read_text() + src.read_text().split("\n", 1)[1].replace("@f(", "@g(")
    src.write_text(two)
    with pytest.raises(sw.ProgramError, match="@f, @g"):
        sw.partition(sw.load_mlir(str(src)))


@pytest.mark.parametrize("timeout", ["nan", "-1", "0", "inf"])
def test_launch_rejects_a_timeout_that_is_not_a_positive_number(
    timeout: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _module_file(tmp_path)
    assert main(["partition", str(src), "-o", str(tmp_path / "p")]) == 0
    capsys.readouterr()
    assert main(["launch", "-n", "2", str(tmp_path / "p"), "--timeout", timeout]) == 2
    assert "timeout must be a positive number" in capsys.readouterr().err


_TAMPERED = [
    (b'{"format": 1, "num_ranks": 0}', "num_ranks must be an integer from 1"),
    (b'{"format": 1, "num_ranks": true}', "num_ranks must be an integer from 1"),
    (b"\xff\xfe{}", "not UTF-8"),
    (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
    (b'{"format": 1, "num_ranks": 2, "func": "nope"}', "names the function 'nope'"),
    (b'{"format": 1, "num_ranks": 2, "func": 5}', "func must be a function name"),
]


@pytest.mark.parametrize(
    ("data", "message"), _TAMPERED, ids=["zero-ranks", "bool-ranks", "not-utf8", "deep", "no-func", "func-not-str"]
)
def test_tampered_meta_json_is_one_line(
    data: bytes, message: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = _module_file(tmp_path)
    out = tmp_path / "p"
    assert main(["partition", str(src), "-o", str(out)]) == 0
    (out / "meta.json").write_bytes(data)
    capsys.readouterr()
    for argv in (["run", str(out), "--check"], ["launch", "-n", "2", str(out), "--check"]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0, err


def test_rank_file_linked_out_of_the_directory_is_refused(tmp_path: Path) -> None:
    src = _module_file(tmp_path)
    out = tmp_path / "p"
    assert main(["partition", str(src), "-o", str(out)]) == 0
    secret = tmp_path / "secret.mlir"
    secret.write_text((out / "rank1.mlir").read_text())
    (out / "rank1.mlir").unlink()
    (out / "rank1.mlir").symlink_to(secret)
    with pytest.raises(sw.ShardwiseError, match="symbolic link out of the partition directory"):
        sw.load_partition(out, 1)


def test_error_messages_are_bounded_and_keep_the_cause() -> None:
    """A bad axis at the end of a sharding of 200,001 dimensions gave an 800 KB message."""
    mesh = sw.Mesh({"x": 2})
    text = "#sdy.sharding<@mesh, [" + ", ".join(['{"x"}'] + ["{}"] * 200_000 + ['{"bad"}']) + "]>"
    with pytest.raises(sw.InvalidShardingError) as info:
        sw.TensorSharding.parse(text, mesh)
    msg = str(info.value)
    assert len(msg) < 1000 and 'unknown axis "bad"' in msg and "characters left out" in msg


def test_search_threads_are_capped_at_the_cpus() -> None:
    """--threads 5000 never finished: each thread searched for the whole time limit."""
    import time

    from shardwise.search import StrategyGraph, solve

    g = StrategyGraph.build(
        [[0, 50], [0, 3]], [[10, 1], [10, 1]], [[0, 4], [1, 5]], [[0, 1]], [[0, 0, 0, 0]], usage_limit=15
    )
    t = time.perf_counter()
    sol = solve(g, 1.0, "local", threads=5000)
    assert sol.feasible and time.perf_counter() - t < 10


def test_huge_meshes_are_not_enumerated_device_by_device(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """show with x=2^26 took over 60 s and 2.7 GB drawing its picture; partition on such a
    mesh built every device list before failing."""
    import time

    t = time.perf_counter()
    assert main(["show", '#sdy.sharding<@mesh, [{"x"}, {}]>', "--mesh", "x=67108864", "--shape", "8,16"]) == 0
    assert "no device picture" in capsys.readouterr().out
    b = sw.Builder(sw.Mesh({"x": 1 << 26}))
    x = b.arg((8, 16), sharding=b.sharding([["x"], None]))
    with pytest.raises(sw.ProgramError, match="one program per device"):
        sw.partition(b.ret(b.negate(x)))
    assert time.perf_counter() - t < 20


@pytest.mark.parametrize("levels", [600, 3000, 20000])
def test_deep_nesting_is_one_error_before_the_parser(levels: int) -> None:
    """600 levels gave a 3,000-line RecursionError; about 2,500 crashed jaxlib's parser."""
    with pytest.raises(sw.ProgramError, match=f"nests regions {levels + 1} levels deep"):
        sw.load_mlir(nested_cases(levels))


def test_nesting_within_the_limit_and_braces_in_strings_are_read() -> None:
    module = sw.load_mlir(nested_cases(200))
    assert sum(1 for op in module.walk() if op.name == "stablehlo.case") == 200
    text = (
        'func.func @main(%arg0: tensor<f32>) -> tensor<f32> {\n  %0 = stablehlo.custom_call @x(%arg0) {backend_config = "'
        + "{" * 1000
        + '"} : (tensor<f32>) -> tensor<f32>\n  return %0 : tensor<f32>\n}'
    )
    assert sw.load_mlir(text).func("main") is not None


_EXAMPLE = {
    "problem": {
        "name": "t",
        "nodes": {"intervals": [[0, 1], [0, 2]], "costs": [[1, 2], [3, 4]], "usages": [[1, 1], [1, 1]]},
        "edges": {"nodes": [[0, 1]], "costs": [[0, 1, 2, 3]]},
        "usage_limit": 10,
    }
}


@pytest.mark.parametrize(
    ("path", "value", "shown"),
    [
        (("nodes", "costs"), 1.5, "1.5 (float)"),
        (("nodes", "usages"), "1", "'1' (str)"),
        (("edges", "costs"), True, "True (bool)"),
    ],
)
def test_iopddl_numbers_must_be_integers(path: tuple[str, str], value: object, shown: str, tmp_path: Path) -> None:
    import copy
    import json

    from shardwise.search import read_instance

    data = copy.deepcopy(_EXAMPLE)
    data["problem"][path[0]][path[1]][0][0] = value  # type: ignore[index]
    f = tmp_path / "i.json"
    f.write_text(json.dumps(data))
    with pytest.raises(
        sw.SearchError,
        match=f"problem.{path[0]}.{path[1]}\\[0\\] must hold integers, got {shown}".replace("(", "\\(").replace(
            ")", "\\)"
        ),
    ):
        read_instance(f)


def test_iopddl_decompressed_size_is_bounded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import gzip

    from shardwise.search import iopddl

    monkeypatch.setattr(iopddl, "MAX_INSTANCE_BYTES", 1 << 20)
    bomb = tmp_path / "bomb.json.gz"
    with gzip.open(bomb, "wb") as g:
        g.write(b" " * (4 << 20))
    assert bomb.stat().st_size < 64 << 10
    with pytest.raises(sw.SearchError, match="over 1 MiB"):
        iopddl.read_instance(bomb)


@pytest.mark.parametrize("method", ["auto", "ilp", "local", "limited"])
def test_infeasible_iopddl_instance_is_answered_alike_by_every_method(
    method: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """auto and ilp raised 'no feasible solution' (exit 2) where the others printed cost: inf
    (exit 0); every method now prints its assignment and cost: inf, and exits 1."""
    import copy
    import json

    data = copy.deepcopy(_EXAMPLE)
    data["problem"]["usage_limit"] = 1  # type: ignore[index]
    f = tmp_path / "infeasible.json"
    f.write_text(json.dumps(data))
    assert main(["iopddl", str(f), "--time-limit", "2", "--method", method]) == 1
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1] == "cost: inf" and out[0].startswith("[")
