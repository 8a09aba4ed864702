"""Running the Pulumi CLI offline with the toolchain this project builds.

Nothing may be downloaded: state lives in a local file backend, the update check and automatic plugin
acquisition are off, and the Kubernetes provider plugin is installed from the binary ``make tools`` built
into a Pulumi home of our own. The Python language host finds the interpreter on PATH, so this
virtualenv's ``bin`` goes first.
"""

from __future__ import annotations

import importlib.resources
import json
import os
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

from infra import toolchain

__all__ = [
    "LOCAL_PASSPHRASE",
    "PulumiError",
    "ensure_kubernetes_plugin",
    "environment",
    "kubernetes_plugin_version",
    "run",
]

# Protects nothing secret (local stacks only); Pulumi needs some passphrase for a file backend.
LOCAL_PASSPHRASE = "esi-local"  # noqa: S105


class PulumiError(RuntimeError):
    """A pulumi command failed; the message holds the command and what it printed."""


def environment(home: Path, backend: Path, base: Mapping[str, str] | None = None) -> dict[str, str]:
    """Environment for an offline pulumi: its home, a file backend, PATH with our binaries first."""
    base = os.environ if base is None else base
    backend.mkdir(parents=True, exist_ok=True)
    shims = _dynamic_provider_shim(home)
    path = [
        str(shims),
        str(Path(sys.executable).parent),
        *(str(p) for p in toolchain.path_entries()),
        base.get("PATH", ""),
    ]
    return {
        **base,
        "PATH": os.pathsep.join(path),
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": backend.resolve().as_uri(),
        "PULUMI_CONFIG_PASSPHRASE": base.get("PULUMI_CONFIG_PASSPHRASE", LOCAL_PASSPHRASE),
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PULUMI_AUTOMATION_API_SKIP_VERSION_CHECK": "true",
    }


def _dynamic_provider_shim(home: Path) -> Path:
    """The plugin Pulumi starts for Python dynamic providers (infra/stacks/local.py uses them).

    Pulumi ships it as a two-line script beside the Python language host; the language host here is built
    from source (tools/recipes/pulumi.sh), which leaves the script out, so it is written here: this
    virtualenv's interpreter running ``pulumi.dynamic``.
    """
    shims = home / "shims"
    shims.mkdir(parents=True, exist_ok=True)
    shim = shims / "pulumi-resource-pulumi-python"
    script = f'#!/bin/sh\nexec "{sys.executable}" -u -m pulumi.dynamic "$@"\n'
    if not shim.exists() or shim.read_text() != script:
        shim.write_text(script)
        shim.chmod(0o755)
    return shims


def run(args: Sequence[str], *, cwd: Path, env: Mapping[str, str], timeout: float = 600) -> str:
    """Run ``pulumi <args>`` non-interactively; its stdout, or PulumiError with everything it printed."""
    command = [str(toolchain.binary("pulumi")), *args, "--non-interactive"]
    done = subprocess.run(command, cwd=cwd, env=dict(env), capture_output=True, text=True, timeout=timeout, check=False)
    if done.returncode != 0:
        raise PulumiError(f"`pulumi {' '.join(args)}` failed (exit {done.returncode}):\n{done.stdout}\n{done.stderr}")
    return done.stdout


def kubernetes_plugin_version() -> str:
    """The provider version the installed pulumi_kubernetes SDK asks the engine for (semver form)."""
    declared = importlib.resources.files("pulumi_kubernetes").joinpath("pulumi-plugin.json").read_text()
    return str(json.loads(declared)["version"])


def ensure_kubernetes_plugin(env: Mapping[str, str], cwd: Path) -> None:
    """Install the locally built pulumi-resource-kubernetes into the Pulumi home, once."""
    version = kubernetes_plugin_version()
    plugins = json.loads(run(["plugin", "ls", "--json"], cwd=cwd, env=env) or "[]")
    if any(p["name"] == "kubernetes" and p["kind"] == "resource" and p["version"] == version for p in plugins):
        return
    binary = toolchain.binary("pulumi-resource-kubernetes")
    run(["plugin", "install", "resource", "kubernetes", version, "--file", str(binary)], cwd=cwd, env=env)
