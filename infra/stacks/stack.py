"""``make up`` / ``make down``: ``pulumi up`` and ``pulumi destroy`` of a stack of this project, offline.

``python -m infra.stacks.stack up [--stack local]`` selects (creating it the first time) the stack, runs
``pulumi up`` with its progress on the terminal, and prints where the API is and how to use it;
``down`` destroys the stack; ``preview`` shows what ``up`` would change (e.g. a Scheduling just committed
under ``manifests/``); ``outputs`` prints the stack's outputs again. Pulumi's state and home live in
``.esi/`` (a local file backend: nothing leaves the machine).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence

from infra import toolchain
from infra.stacks import pulumi_local

__all__ = ["main"]

STATE = toolchain.REPO_ROOT / ".esi"
POLICY_PACK = toolchain.REPO_ROOT / "policies" / "esi-policy-pack"


def _env() -> dict[str, str]:
    env = pulumi_local.environment(home=STATE / "pulumi-home", backend=STATE / "pulumi-state")
    pulumi_local.ensure_kubernetes_plugin(env, cwd=toolchain.REPO_ROOT)
    return env


def _pulumi(args: Sequence[str], env: dict[str, str], *, policies: bool = False) -> int:
    """Run pulumi with its output on the terminal (progress of long work), return its exit status."""
    # The pack as an executable: the Python language host built here cannot start a pack from its directory
    # (policies/esi-policy-pack says why).
    extra = ["--policy-pack", str(POLICY_PACK)] if policies else []
    command = [str(toolchain.binary("pulumi")), *args, *extra, "--non-interactive"]
    return subprocess.run(command, cwd=toolchain.REPO_ROOT, env=env, check=False).returncode


def _select(stack: str, env: dict[str, str]) -> None:
    pulumi_local.run(["stack", "select", stack, "--create"], cwd=toolchain.REPO_ROOT, env=env)


def outputs(stack: str, env: dict[str, str]) -> dict[str, object]:
    printed = pulumi_local.run(
        ["stack", "output", "--json", "--show-secrets", "--stack", stack], cwd=toolchain.REPO_ROOT, env=env
    )
    values: dict[str, object] = json.loads(printed or "{}")
    return values


def _print_outputs(stack: str, env: dict[str, str]) -> None:
    values = outputs(stack, env)
    if "apiUrl" not in values:
        print(json.dumps(values, indent=2))
        return
    print(
        f"""
esi is up (stack {stack}).
  UI         {values.get("uiUrl")}   (sign in with the token)
  API        {values["apiUrl"]}   (docs: {values.get("docsUrl")})
  token      {values.get("apiToken")}
  kubeconfig {values.get("kubeconfig")}

  export ESI_URL={values["apiUrl"]} ESI_TOKEN={values.get("apiToken")} KUBECONFIG={values.get("kubeconfig")}
  export PATH={toolchain.binary("kubectl").parent}:$PATH   # kubectl, as built for this stack
  .venv/bin/esi overview          # or: kubectl get testbeds,batchjobs,schedulings
  commit a Scheduling under manifests/ and run `make up` again, or submit one: .venv/bin/esi submit FILE"""
    )
    if values.get("realNamespace"):
        print(
            f"""
  real nodes: jobs in namespace {values["realNamespace"]} run for real (the Spark operator, the Flink stand-in),
  with the images {values.get("sparkImage")} and {values.get("flinkImage")}:
  .venv/bin/esi --namespace {values["realNamespace"]} overview"""
        )


def main(argv: Sequence[str] | None = None) -> int:
    cli = argparse.ArgumentParser(prog="python -m infra.stacks.stack", description=__doc__.split("\n\n")[0])
    cli.add_argument("command", choices=["up", "down", "preview", "outputs"])
    cli.add_argument("--stack", default="local", help="the stack (default: %(default)s)")
    cli.add_argument("--no-policies", action="store_true", help="skip the policy pack (policies/)")
    args = cli.parse_args(argv)
    env = _env()
    _select(args.stack, env)
    policies = not args.no_policies
    if args.command == "up":
        status = _pulumi(["up", "--yes", "--stack", args.stack], env, policies=policies)
        if status == 0:
            _print_outputs(args.stack, env)
        return status
    if args.command == "preview":
        return _pulumi(["preview", "--diff", "--stack", args.stack], env, policies=policies)
    if args.command == "down":
        return _pulumi(["destroy", "--yes", "--stack", args.stack], env)
    _print_outputs(args.stack, env)
    return 0


if __name__ == "__main__":
    sys.exit(main())
