"""The kube-scheduler extender: the second scheduler asks it where each executor pod may go.

``app`` is its FastAPI application (``create_extender_app``), served on a listener of its own; ``wire`` the
upstream wire format (``k8s.io/kube-scheduler/extender/v1``) as pydantic models; ``slot_index`` the
in-memory index of every Testbed's slots and which executor each slot is given to (pure, answers under a
lock); ``feed`` keeps that index in step with the cluster from watches; ``routes`` the ``/extender/filter``
and ``/extender/preempt`` verbs.
"""

__all__: list[str] = []
