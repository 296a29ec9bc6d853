"""The per-run data keys of envelope encryption (core/sealing.py)."""

from __future__ import annotations

from django.db import models


class DataKey(models.Model):
    """One run's data key, wrapped (sealed) by the master key ring.

    No foreign key: ``core`` knows no app. Destroying a key (erasure) clears ``wrapped`` and sets
    ``destroyed_at``: a tombstone, so a destroyed key reads as "erased" while a *missing* key is
    an integrity error that raises (a lost row never passes for an erasure).
    """

    run_id = models.UUIDField(primary_key=True)
    wrapped = models.BinaryField(null=True)
    created_at = models.DateTimeField(auto_now_add=True)
    destroyed_at = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"data key of run {self.run_id}" + (" (destroyed)" if self.destroyed_at else "")
