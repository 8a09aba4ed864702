"""The Kubernetes adapters the three processes (operators, API, simulator) share when they talk to the API
server, through lightkube and kopf.

========================  =========================================================================
``kube.resources``        lightkube classes for esi's custom resources
``kube.errors``           the API server's refusals told apart once (``Refusal``), and ``ignore``
``kube.writes``           create-if-absent, and status writes guarded by the version decided on
``kube.pod_writes``       the extender's bind: a ghost's deletion and a binding, over a lean client
``kube.watch``            following a kind of object: LIST, then WATCH, relisting after any failure
``kube.metadata``         listing objects by their metadata only (``PartialObjectMetadataList``)
``kube.indexes``          kopf indexes with typed handles instead of string keys
========================  =========================================================================

The manifests themselves (owner references among them) are pure data built in ``esi.objects``.
"""

__all__: list[str] = []
