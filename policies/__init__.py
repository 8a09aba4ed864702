"""CrossGuard policies for esi manifests (validators live in plain modules so tests can import them)."""
