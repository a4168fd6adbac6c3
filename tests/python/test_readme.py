"""Every fenced code block of README.md runs as written (issue 24, "README as a guide").

Python blocks run in a fresh ``sys.executable``; ``sh``/``bash``/``console`` blocks run with
``bash -euo pipefail``. All blocks share one temporary working directory laid out like the
clone's root, in README order, so a block may use a file an earlier block wrote: ``.venv`` there
links to this interpreter's venv (the README says ``source .venv/bin/activate``) and
``../shared`` to the ``shared`` folder beside the repository. The venv's ``bin`` is first on
``PATH`` and ``XLA_FLAGS`` gives XLA 8 CPU devices.

A block may be exempt only with an HTML comment right before it: ``<!-- not run: install -->``
(the set-up commands, which build the package; CI runs ``bash scripts/test`` itself) or
``<!-- not run: long -->`` (at most two blocks that take minutes). Blocks that name
``../shared`` skip when it is absent.

A second test checks that every relative link of README.md points at an existing file.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
SHARED = ROOT.parent / "shared"
VENV_BIN = Path(sys.executable).parent
VENV = VENV_BIN.parent

RUN_LANGS = {"python": "python", "sh": "sh", "bash": "sh", "console": "sh"}
EXEMPT = {"install", "long"}
MAX_LONG = 2
TIMEOUT_S = 300

_FENCE = re.compile(r"^(?P<fence>```+|~~~+)[ \t]*(?P<info>[^\n`]*)$")
_EXEMPT = re.compile(r"^<!--\s*not run:\s*(?P<why>[\w-]+)\s*-->$")
_HEADING = re.compile(r"^(#{1,6})\s+(?P<title>.+?)\s*#*\s*$")


@dataclass(frozen=True)
class Block:
    heading: str
    index: int  # position among the fenced blocks of its section, from 0
    line: int  # 1-based line of the opening fence
    lang: str  # "" when the fence names none
    code: str
    exempt: str | None  # "install", "long", or None

    @property
    def id(self) -> str:
        slug = re.sub(r"[^a-z0-9]+", "-", self.heading.lower()).strip("-") or "top"
        return f"{slug}-{self.index}"


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of ``text`` in order, with their section heading and exemption."""
    blocks: list[Block] = []
    lines = text.split("\n")
    heading, per_section = "top", 0
    prev_nonblank = ""
    i = 0
    while i < len(lines):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            fence, info = m.group("fence"), m.group("info").strip()
            body: list[str] = []
            j = i + 1
            while j < len(lines) and not lines[j].startswith(fence):
                body.append(lines[j])
                j += 1
            if j == len(lines):
                raise AssertionError(f"README.md:{i + 1}: unclosed code fence")
            ex = _EXEMPT.match(prev_nonblank.strip())
            lang = info.split()[0].lower() if info else ""
            blocks.append(
                Block(heading, per_section, i + 1, lang, "\n".join(body) + "\n", ex.group("why") if ex else None)
            )
            per_section += 1
            prev_nonblank = lines[j]
            i = j + 1
            continue
        h = _HEADING.match(line)
        if h:
            heading, per_section = h.group("title"), 0
        if line.strip():
            prev_nonblank = line
        i += 1
    return blocks


BLOCKS = readme_blocks(README.read_text(encoding="utf-8"))


def test_blocks_are_marked() -> None:
    """Every block is runnable or carries an explicit exemption; exemptions are few."""
    for b in BLOCKS:
        assert b.lang in RUN_LANGS or b.exempt, (
            f"README.md:{b.line}: a ```{b.lang or '(no language)'} block is neither python nor sh/bash/console "
            "and has no <!-- not run: ... --> comment"
        )
        assert b.exempt is None or b.exempt in EXEMPT, f"README.md:{b.line}: unknown exemption {b.exempt!r}"
    assert sum(b.exempt == "install" for b in BLOCKS) <= 2
    assert sum(b.exempt == "long" for b in BLOCKS) <= MAX_LONG
    assert sum(b.exempt is None for b in BLOCKS) >= 10, "the README should show runnable examples"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One directory for every block, laid out like the clone's root: ``.venv`` (this
    interpreter's venv) and ``../shared`` (the one beside the repository) are links."""
    base = tmp_path_factory.mktemp("readme")
    work = base / "clone"
    work.mkdir()
    if (VENV / "bin" / "activate").exists():
        (work / ".venv").symlink_to(VENV, target_is_directory=True)
    if SHARED.is_dir():
        (base / "shared").symlink_to(SHARED, target_is_directory=True)
    return work


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
    env["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"
    env.pop("PYTHONPATH", None)
    env["PYTHONUNBUFFERED"] = "1"
    env["COLUMNS"] = "100"
    return env


def _tail(text: str, n: int = 4000) -> str:
    return text if len(text) <= n else "…" + text[-n:]


@pytest.mark.parametrize("block", BLOCKS, ids=[b.id for b in BLOCKS])
def test_readme_block(block: Block, workdir: Path) -> None:
    if block.exempt:
        pytest.skip(f"marked <!-- not run: {block.exempt} -->")
    if "../shared" in block.code and not SHARED.is_dir():
        pytest.skip(f"{SHARED} is absent")
    if "source .venv/bin/activate" in block.code and not (workdir / ".venv").exists():
        pytest.skip(f"{sys.executable} does not run in a venv with bin/activate")
    kind = RUN_LANGS[block.lang]
    cmd = [sys.executable, "-c", block.code] if kind == "python" else ["bash", "-euo", "pipefail", "-c", block.code]
    try:
        r = subprocess.run(cmd, cwd=workdir, env=_env(), capture_output=True, text=True, timeout=TIMEOUT_S)
    except subprocess.TimeoutExpired as e:
        pytest.fail(
            f"README.md:{block.line} ({block.id}) ran past {TIMEOUT_S} s\n--- stdout\n"
            f"{_tail(str(e.stdout or ''))}\n--- stderr\n{_tail(str(e.stderr or ''))}"
        )
    assert r.returncode == 0, (
        f"README.md:{block.line} ({block.id}) exited with {r.returncode}\n--- block\n{block.code}"
        f"--- stdout (tail)\n{_tail(r.stdout)}\n--- stderr (tail)\n{_tail(r.stderr)}"
    )


_LINK = re.compile(r"!?\[[^\]]*\]\((?P<target><[^>]+>|[^)\s]+)(?:\s+\"[^\"]*\")?\)")
_REF = re.compile(r"^\s*\[[^\]]+\]:\s*(?P<target>\S+)", re.MULTILINE)


def _without_code(text: str) -> str:
    """``text`` with fenced blocks and inline code removed (links inside code are not links)."""
    text = re.sub(r"^(```+|~~~+).*?^\1[ \t]*$", "", text, flags=re.DOTALL | re.MULTILINE)
    return re.sub(r"`[^`\n]*`", "", text)


def relative_links(text: str) -> list[str]:
    text = _without_code(text)
    targets = [m.group("target").strip("<>") for m in _LINK.finditer(text)]
    targets += [m.group("target") for m in _REF.finditer(text)]
    return [t for t in targets if not re.match(r"^[a-z][a-z0-9+.-]*:", t, re.IGNORECASE) and not t.startswith("#")]


def _anchors(md: str) -> set[str]:
    """GitHub's heading anchors of a Markdown text."""
    out = set()
    for line in _without_code(md).split("\n"):
        h = _HEADING.match(line)
        if h:
            title = re.sub(r"[^\w\- ]", "", h.group("title").replace("`", "").lower())
            out.add(title.replace(" ", "-"))
    return out


def test_readme_links_exist() -> None:
    links = relative_links(README.read_text(encoding="utf-8"))
    assert links, "README.md should link to docs/ and benches/"
    missing = []
    for link in links:
        path, _, anchor = link.partition("#")
        target = (README.parent / path).resolve()
        if not target.exists():
            missing.append(f"{link} (no file {target})")
        elif anchor and target.suffix == ".md" and anchor not in _anchors(target.read_text(encoding="utf-8")):
            missing.append(f"{link} (no heading #{anchor} in {path})")
    assert not missing, "README.md links to missing files:\n" + "\n".join(missing)
