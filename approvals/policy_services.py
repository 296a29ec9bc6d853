"""Moved to ``approvals.services.policy``; kept importable for
console/management/commands/seed_demo.py and docs/policy.md until they name the new home."""

from approvals.services.policy import (  # noqa: F401
    policy_change_record,
    policy_object_delete,
    policy_seed_demo,
    policy_snapshot,
)
