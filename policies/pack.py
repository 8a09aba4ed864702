"""esi's CrossGuard policies: the rules of ``policies.rules`` as pulumi_policy policies, fed the stack's resources.

Importing this module starts nothing; ``python -m policies`` (``__main__``) builds the PolicyPack, which
starts the analyzer server the Pulumi engine talks to.

When the engine runs them:

* stack policies (``rules.STACK_RULES``) get every resource's *outputs* once the engine has computed them
  all: at the end of a preview, and at the end of an update. ``pulumi preview`` fails on a violation, and
  so does ``pulumi up``, in the preview it runs first — before anything is changed. (``pulumi up
  --skip-preview`` has no such preview: the stack policies then fail the update only after it applied its
  changes.)
* resource policies (``rules.RESOURCE_RULES``) get one resource's *inputs* before the engine sends it to
  the cluster, in previews and updates alike.

Every policy is mandatory except the advisory one, which reports what could not be checked.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pulumi_policy import (
    EnforcementLevel,
    Policy,
    PolicyProviderResource,
    PolicyResource,
    ReportViolation,
    ResourceValidationArgs,
    ResourceValidationPolicy,
    StackValidationArgs,
    StackValidationPolicy,
)
from pulumi_policy.proxy import UnknownValueError

from policies.rules import (
    RESOURCE_RULES,
    STACK_RULES,
    KubeObject,
    ObjectKey,
    ResourceRule,
    StackRule,
    resource_object,
    stack_of,
)

__all__ = ["known", "policies", "resource_policy", "stack_policy"]


def policies() -> list[Policy]:
    """One policy per rule."""
    return [*(stack_policy(rule) for rule in STACK_RULES), *(resource_policy(rule) for rule in RESOURCE_RULES)]


def stack_policy(rule: StackRule) -> StackValidationPolicy:
    def validate(args: StackValidationArgs, report_violation: ReportViolation) -> None:
        objects = [(_object_of(r), r.urn) for r in args.resources]
        urns: dict[ObjectKey, str] = {}
        for obj, urn in objects:
            urns.setdefault(obj.key, urn)
        for violation in rule.check(stack_of(obj for obj, _ in objects)):
            report_violation(violation.message, urns.get(violation.subject))

    level = EnforcementLevel.ADVISORY if rule.advisory else EnforcementLevel.MANDATORY
    return StackValidationPolicy(rule.name, rule.description, validate, enforcement_level=level)


def resource_policy(rule: ResourceRule) -> ResourceValidationPolicy:
    def validate(args: ResourceValidationArgs, report_violation: ReportViolation) -> None:
        obj = resource_object(args.resource_type, args.name, known(args.props), _namespace_of(args.provider))
        for violation in rule.check(obj):
            report_violation(violation.message, None)

    return ResourceValidationPolicy(rule.name, rule.description, validate, enforcement_level=EnforcementLevel.MANDATORY)


def known(value: Any) -> Any:
    """Resource properties as plain data, each value Pulumi cannot know yet (in a preview) as None.

    pulumi_policy raises UnknownValueError when such a value is read; read each one on its own, so that
    one unknown field costs only the checks that need it, not the whole policy.
    """
    if isinstance(value, Mapping):
        return {str(key): known(_read(value, key)) for key in value}
    if isinstance(value, Sequence) and not isinstance(value, str | bytes):
        return [known(_read(value, index)) for index in range(len(value))]
    return value


def _read(container: Mapping[Any, Any] | Sequence[Any], key: Any) -> Any:
    try:
        return container[key]
    except UnknownValueError:
        return None


def _object_of(resource: PolicyResource) -> KubeObject:
    return resource_object(
        resource.resource_type, resource.name, known(resource.props), _namespace_of(resource.provider)
    )


def _namespace_of(provider: PolicyProviderResource | None) -> str:
    """Where the resource's provider puts namespaced objects that name no namespace."""
    namespace = known(provider.props).get("namespace") if provider is not None else None
    return namespace if isinstance(namespace, str) and namespace else "default"
