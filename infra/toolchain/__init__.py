"""Build, cache and locate the binaries the local environment runs.

Nothing here is downloaded from a release page: every tool is compiled from the Go module proxy by a
recipe in ``tools/recipes/<tool>.sh`` (contract in ``tools/recipes/lib.sh``). Versions come from one
place, ``pyproject.toml``: the exact pins of ``pulumi`` and ``pulumi-kubernetes`` (in the ``infra`` extra)
and the ``[tool.esi.toolchain]`` table.

Each tool is installed into ``<cache>/<tool>-<version>-<recipe digest>/bin``; the directory appears only
when its recipe succeeded, so an interrupted build is simply resumed (the recipe's scratch directory, the
Go module cache and the Go build cache survive) and a complete one costs nothing. The cache is
``$ESI_TOOLS_DIR``, else ``$XDG_CACHE_HOME/esi/tools``, else ``~/.cache/esi/tools``.

The package is what the machine needs before anything else runs, so all of it runs with the bare system
Python, before any virtualenv exists (the import contract ``toolchain-stdlib-only`` checks that it imports only
the standard library): ``python3 -m infra.toolchain --help``. Beside the tools: ``commands`` (running the host's
commands, machine-wide locks), ``debian`` (apt-get), and what it installs, ``node_packages`` (real nodes and
images) and ``browser`` (Chromium for the UI's test).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import time
import tomllib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

__all__ = [
    "REPO_ROOT",
    "TOOLS",
    "Tool",
    "ToolchainError",
    "binary",
    "cache_root",
    "ensure",
    "load_pins",
    "main",
    "missing",
    "path_entries",
    "prune",
]

REPO_ROOT = Path(__file__).resolve().parents[2]
RECIPES = REPO_ROOT / "tools" / "recipes"
HEARTBEAT_SECONDS = 60.0


class ToolchainError(RuntimeError):
    """A tool is missing, or building it failed (the message names the tool and the step)."""


@dataclass(frozen=True)
class Tool:
    """One recipe: the pins it reads (the first names its version) and the binaries it produces."""

    name: str
    pins: tuple[str, ...]
    binaries: tuple[str, ...]
    recipes: Path = RECIPES

    @property
    def version_pin(self) -> str:
        return self.pins[0]

    @property
    def recipe(self) -> Path:
        return self.recipes / f"{self.name}.sh"


TOOLS: tuple[Tool, ...] = (
    Tool("etcd", ("etcd",), ("etcd", "etcdctl")),
    Tool("kwok", ("kwok",), ("kwok", "kwokctl")),
    Tool(
        "kubernetes",
        ("kubernetes",),
        ("kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy"),
    ),
    Tool(
        "pulumi",
        ("pulumi", "pulumi-python-host-sdk"),
        ("pulumi", "pulumi-language-python", "pulumi-language-python-exec"),
    ),
    Tool("pulumi-kubernetes", ("pulumi-kubernetes", "pulumi-kubernetes-commit"), ("pulumi-resource-kubernetes",)),
    Tool("spark-operator", ("spark-operator",), ("spark-operator",)),
    Tool("coredns", ("coredns",), ("coredns",)),
)


def load_pins(pyproject: Path = REPO_ROOT / "pyproject.toml") -> dict[str, str]:
    """Every pinned version: the toolchain table plus the exact pins of pulumi and pulumi-kubernetes.

    The pins are looked for in the dependencies and in every extra, wherever the project keeps them.
    """
    data = tomllib.loads(pyproject.read_text())
    pins = {str(k): str(v) for k, v in data["tool"]["esi"]["toolchain"].items()}
    project = data["project"]
    requirements = [*project.get("dependencies", [])]
    for extra in project.get("optional-dependencies", {}).values():
        requirements.extend(extra)
    for requirement in requirements:
        match = re.fullmatch(r"(pulumi|pulumi-kubernetes)==([\w.]+)", requirement.strip())
        if match:
            pins[match[1]] = match[2]
    for tool in TOOLS:
        for pin in tool.pins:
            if pin not in pins:
                raise ToolchainError(f"{pyproject}: no exact pin for {pin!r} (needed by {tool.name})")
        if not tool.recipe.is_file():
            raise ToolchainError(f"{tool.name}: recipe {tool.recipe} is missing")
    return pins


def cache_root() -> Path:
    if explicit := os.environ.get("ESI_TOOLS_DIR"):
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(xdg) / "esi" / "tools"


def _recipe_env(tool: Tool, pins: dict[str, str]) -> dict[str, str]:
    return {"PIN_" + k.upper().replace("-", "_"): pins[k] for k in tool.pins}


def install_dir(tool: Tool, pins: dict[str, str]) -> Path:
    """Where a tool lives: keyed by its version and by what its recipe would do with it."""
    digest = hashlib.sha256()
    for part in ((tool.recipes / "lib.sh").read_bytes(), tool.recipe.read_bytes(), json.dumps(_recipe_env(tool, pins))):
        digest.update(part if isinstance(part, bytes) else part.encode())
    changes = tool.recipes / tool.name  # what the recipe applies (patches, source files), beside it
    for path in sorted(p for p in changes.rglob("*") if p.is_file()):
        digest.update(path.relative_to(changes).as_posix().encode())
        digest.update(path.read_bytes())
    return cache_root() / f"{tool.name}-{pins[tool.version_pin]}-{digest.hexdigest()[:10]}"


def _is_installed(tool: Tool, pins: dict[str, str]) -> bool:
    bin_dir = install_dir(tool, pins) / "bin"
    return all(os.access(bin_dir / b, os.X_OK) for b in tool.binaries)


def missing(pins: dict[str, str] | None = None, tools: Sequence[Tool] = TOOLS) -> list[Tool]:
    pins = pins or load_pins()
    return [t for t in tools if not _is_installed(t, pins)]


def binary(name: str, pins: dict[str, str] | None = None) -> Path:
    """The path of one built binary, e.g. ``binary("kube-scheduler")``."""
    pins = pins or load_pins()
    for tool in TOOLS:
        if name in tool.binaries:
            path = install_dir(tool, pins) / "bin" / name
            if not os.access(path, os.X_OK):
                raise ToolchainError(f"{name} ({tool.name} {pins[tool.version_pin]}) is not built: run `make tools`")
            return path
    raise ToolchainError(f"no recipe produces a binary named {name!r}")


def path_entries(pins: dict[str, str] | None = None) -> list[Path]:
    """The bin directories of every tool, for PATH."""
    pins = pins or load_pins()
    return [install_dir(t, pins) / "bin" for t in TOOLS]


_INSTALL_NAME = re.compile(r"(?P<tool>.+)-[^-]+-[0-9a-f]{10}")  # <tool>-<version>-<recipe digest>


def prune(pins: dict[str, str] | None = None, tools: Sequence[Tool] = TOOLS) -> list[Path]:
    """Remove installed builds that no current pin or recipe asks for (older versions, changed recipes)."""
    pins = pins or load_pins()
    wanted = {install_dir(t, pins) for t in tools}
    names = {t.name for t in tools}
    root = cache_root()
    if not root.is_dir():
        return []
    stale = []
    for directory in sorted(root.iterdir()):
        match = _INSTALL_NAME.fullmatch(directory.name)
        if directory.is_dir() and match and match["tool"] in names and directory not in wanted:
            stale.append(directory)
    with _exclusive(root, sys.stderr):
        for directory in stale:
            shutil.rmtree(directory)
    return stale


@contextlib.contextmanager
def _exclusive(root: Path, out: TextIO) -> Iterator[None]:
    """One builder at a time per cache (parallel test workers, two terminals)."""
    root.mkdir(parents=True, exist_ok=True)
    with (root / ".lock").open("w") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            print("toolchain: another build holds the cache lock; waiting for it", file=out, flush=True)
            fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def _minutes(seconds: float) -> str:
    return f"{int(seconds // 60)}m{int(seconds % 60):02d}s"


def _build(tool: Tool, pins: dict[str, str], index: str, out: TextIO) -> None:
    version = pins[tool.version_pin]
    final = install_dir(tool, pins)
    root = cache_root()
    work = root / "work" / f"{tool.name}-{version}"
    staging = root / "staging" / final.name
    log_path = root / "logs" / f"{tool.name}-{version}.log"
    for d in (work, log_path.parent):
        d.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(staging, ignore_errors=True)
    (staging / "bin").mkdir(parents=True)
    step_file = work / ".step"
    step_file.write_text("start\n")

    env = {
        **os.environ,
        **_recipe_env(tool, pins),
        "TOOL": tool.name,
        "VERSION": version,
        "WORK": str(work),
        "OUT": str(staging),
    }
    print(f"toolchain: {index} building {tool.name} {version} (log: {log_path})", file=out, flush=True)
    started = time.monotonic()
    with log_path.open("w") as log:
        proc = subprocess.Popen(
            ["bash", "-c", 'source "$1" && source "$2"', "recipe", str(tool.recipes / "lib.sh"), str(tool.recipe)],
            cwd=REPO_ROOT,
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        shown, shown_at = "", started
        while True:
            try:
                code = proc.wait(timeout=2)
                break
            except subprocess.TimeoutExpired:
                pass
            current = step_file.read_text().strip()
            now = time.monotonic()
            if current != shown or now - shown_at >= HEARTBEAT_SECONDS:
                print(f"  {tool.name}: {current} ({_minutes(now - started)})", file=out, flush=True)
                shown, shown_at = current, now
    step = step_file.read_text().strip()
    if code != 0:
        tail = "".join(log_path.read_text(errors="replace").splitlines(keepends=True)[-25:])
        raise ToolchainError(
            f"building {tool.name} {version} failed at step '{step}' (exit {code}).\nLast lines of {log_path}:\n{tail}"
        )
    absent = [b for b in tool.binaries if not os.access(staging / "bin" / b, os.X_OK)]
    if absent:
        raise ToolchainError(f"building {tool.name} {version}: recipe succeeded but did not produce {absent}")
    seconds = time.monotonic() - started
    (staging / "manifest.json").write_text(
        json.dumps({"tool": tool.name, "version": version, "build_seconds": round(seconds, 1)}, indent=2) + "\n"
    )
    shutil.rmtree(final, ignore_errors=True)
    staging.rename(final)
    print(f"toolchain: {index} {tool.name} {version} ready in {_minutes(seconds)}", file=out, flush=True)


def ensure(
    only: Sequence[str] = (),
    out: TextIO = sys.stderr,
    *,
    tools: Sequence[Tool] = TOOLS,
    pins: dict[str, str] | None = None,
) -> list[Tool]:
    """Build whatever is missing (optionally only the named tools); returns what was built."""
    pins = pins or load_pins()
    unknown = set(only) - {t.name for t in tools}
    if unknown:
        raise ToolchainError(f"unknown tool(s) {sorted(unknown)}; known: {[t.name for t in tools]}")
    wanted = [t for t in missing(pins, tools) if not only or t.name in only]
    if not wanted:
        return []
    with _exclusive(cache_root(), out):
        wanted = [t for t in wanted if not _is_installed(t, pins)]  # another builder may have finished
        for i, tool in enumerate(wanted, 1):
            _build(tool, pins, f"[{i}/{len(wanted)}]", out)
    return wanted


def main(argv: Sequence[str] | None = None) -> int:
    """``python3 -m infra.toolchain``: its command line (``infra/toolchain/__main__.py``)."""
    parser = argparse.ArgumentParser(
        prog="python3 -m infra.toolchain",
        description="Build (from the Go module proxy), cache and locate the local environment's binaries.",
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_ensure = sub.add_parser("ensure", help="build every missing tool (nothing to do when all are cached)")
    p_ensure.add_argument("tools", nargs="*", help="only these tools (default: all)")
    sub.add_parser("status", help="list the tools, their pinned versions and whether each is built")
    sub.add_parser("path", help="print the tools' bin directories, colon-separated, for PATH")
    sub.add_parser("prune", help="delete cached builds that no current pin or recipe uses")
    p_which = sub.add_parser("which", help="print the path of one binary")
    p_which.add_argument("binary")
    args = parser.parse_args(argv)
    try:
        if args.command == "ensure":
            built = ensure(args.tools)
            if not built:
                print("toolchain: everything is built", file=sys.stderr)
        elif args.command == "status":
            pins = load_pins()
            for tool in TOOLS:
                state = "built" if _is_installed(tool, pins) else "missing"
                print(f"{tool.name:<18} {pins[tool.version_pin]:<18} {state:<8} {install_dir(tool, pins)}")
        elif args.command == "prune":
            for directory in prune():
                print(f"removed {directory}")
        elif args.command == "path":
            print(os.pathsep.join(str(p) for p in path_entries()))
        else:
            print(binary(args.binary))
    except ToolchainError as err:
        print(f"toolchain: {err}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("toolchain: interrupted; run it again to resume", file=sys.stderr)
        return 130
    return 0
