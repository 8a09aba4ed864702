"""The three custom resources as pydantic models — the single source of truth for their CRDs.

``meta`` holds what they share (API group, the camelCase base model, references, conditions), ``quantity``
Kubernetes resource quantities, ``testbed``/``batchjob``/``scheduling`` one resource each, and ``crds`` the
CustomResourceDefinitions generated from them.
"""
