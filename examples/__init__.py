"""Example external schedulers, written against esi's public Python client (``esi.client``) only.

Nothing in ``esi/`` imports this package: an example is what a scheduling researcher would write outside
the project, so it may use nothing a user of the published client could not.
"""

__all__: list[str] = []
