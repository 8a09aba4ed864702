"""Start esi's policy pack: the analyzer server the Pulumi engine asks about every resource and the stack.

Run by the engine, never by hand: ``pulumi up --policy-pack policies/esi-policy-pack`` (see that script for
why not the directory itself with this project's toolchain). The policies are built in ``policies.pack``.
"""

from __future__ import annotations

from pulumi_policy import EnforcementLevel, PolicyPack

from policies.pack import policies

__all__: list[str] = []

PolicyPack(
    "esi",
    policies(),
    enforcement_level=EnforcementLevel.MANDATORY,
    description="esi's rules for Testbeds, BatchJobs and Schedulings, and the cluster settings slots rely on.",
)
