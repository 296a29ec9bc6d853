"""The effects ledger: each side effect exactly once per idempotency key (invariant 1).

``ledger`` claims, calls and records; ``compensation`` undoes (sagas); ``errors`` is what tools
and the ledger raise.
"""
