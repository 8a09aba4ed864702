"""esi's Pulumi program in a throw-away project of a test's own: offline, its own Pulumi home and state."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from infra import toolchain
from infra.stacks import pulumi_local

__all__ = ["PulumiProject"]


@dataclass(frozen=True)
class PulumiProject:
    """A throw-away Pulumi project running esi's program (infra/__main__.py) offline, with its own home and
    state, so nothing touches the repository's own stacks."""

    directory: Path
    env: dict[str, str]

    @classmethod
    def create(cls, root: Path) -> PulumiProject:
        directory = root / "project"
        directory.mkdir()
        venv = Path(sys.executable).parent.parent
        project = {
            "name": "esi",
            "main": str(toolchain.REPO_ROOT / "infra"),
            "runtime": {"name": "python", "options": {"virtualenv": str(venv)}},
        }
        (directory / "Pulumi.yaml").write_text(json.dumps(project))
        env = pulumi_local.environment(home=root / "pulumi-home", backend=root / "state")
        pulumi_local.ensure_kubernetes_plugin(env, cwd=directory)
        return cls(directory, env)

    def __call__(self, *args: str) -> str:
        return pulumi_local.run(list(args), cwd=self.directory, env=self.env, timeout=900)

    def init_stack(self, name: str, config: dict[str, Any]) -> None:
        """Create the stack and give it ``config`` (objects as objects, which ``config set`` cannot).

        The stack file is written as JSON, which is YAML whose strings are all quoted: PyYAML writes YAML 1.1 and
        leaves a string such as 257e71 (a test's random suffix) bare, which Pulumi, reading YAML 1.2, takes for a
        number."""
        self("stack", "init", name)
        stack_file = self.directory / f"Pulumi.{name}.yaml"
        stack = yaml.safe_load(stack_file.read_text()) or {}
        stack_file.write_text(json.dumps({**stack, "config": config}, indent=2))
