"""Pure decisions: each a function of what is observed now, tested without a cluster.

``layout`` places a Testbed's slots on its nodes and numbers them; ``allocation`` chooses which of a
Scheduling's jobs get which slots next; ``testbed_lifecycle``, ``batchjob_lifecycle`` and
``scheduling_lifecycle`` decide each resource's next status and the actions its reconciler takes.
"""
