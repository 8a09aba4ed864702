"""kopf reconcilers for Testbed, BatchJob and Scheduling: thin shells around esi.

Named operators, not operator: the standard library module `operator` is imported while the interpreter
starts, so a top-level package of that name could never be imported.
"""
