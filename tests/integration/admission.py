"""The pods KWOK refused as a kubelet's admission does.

The toolchain's KWOK admits a pod as a kubelet does (tools/recipes/kwok/, with Go tests of its own): one whose
requests do not fit beside those of the pods it admitted before on its node, and that have neither finished nor
gone, is refused in the kubelet's words (phase ``Failed``, reason ``OutOfcpu``/``OutOfmemory``/``OutOfpods``) and
told in a Warning Event. Those Events are read here: they outlive the pods they name. test_real_nodes holds KWOK's
refusal to the real kubelet's for the same pod; real nodes' kubelets tell theirs under another source, left alone.
"""

from __future__ import annotations

from dataclasses import dataclass

from lightkube import Client
from lightkube.resources.core_v1 import Event

KWOK_EVENT_SOURCE = "kwok_controller"
REFUSAL_REASON_PREFIX = "OutOf"  # the kubelet's reason for a resource short: OutOfcpu, OutOfmemory, OutOfpods


@dataclass(frozen=True)
class Refusal:
    """A pod KWOK refused, in the kubelet's words."""

    namespace: str
    pod: str
    reason: str
    message: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.pod}: {self.reason}: {self.message}"


class KubeletAdmission:
    """KWOK's refusals by namespace, and which namespaces' tests expect them."""

    def __init__(self, client: Client) -> None:
        self._client = client
        self._expected: set[str] = set()

    def refused_in(self, namespace: str) -> list[Refusal]:
        """The pods of ``namespace`` KWOK refused so far, oldest refusal first."""
        events = self._client.list(Event, namespace=namespace, fields={"type": "Warning", "source": KWOK_EVENT_SOURCE})
        told = sorted(
            (e for e in events if (e.reason or "").startswith(REFUSAL_REASON_PREFIX)),
            key=lambda e: str(e.firstTimestamp or e.eventTime or ""),
        )
        return [Refusal(namespace, str(e.involvedObject.name), str(e.reason), str(e.message)) for e in told]

    def expect_refusals(self, namespace: str) -> None:
        """``namespace``'s refusals are what its test measures: ``unexpected_in`` leaves them out."""
        self._expected.add(namespace)

    def unexpected_in(self, namespace: str) -> list[Refusal]:
        """What ``refused_in`` says, unless ``namespace``'s test expects refusals."""
        return [] if namespace in self._expected else self.refused_in(namespace)
