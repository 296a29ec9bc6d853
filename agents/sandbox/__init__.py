"""Stand-ins for external systems (``systems``) and the demo tools that call them (``tools``).

Every sandbox write commits on its own, dedupes on its idempotency key and is labelled as
sandbox data in the console (invariant 9).
"""
