"""esi: the pure core — models of the three custom resources, slot layout, placement, state machines.

Nothing here talks to the network: no Kubernetes client, no kopf, no FastAPI.
"""
