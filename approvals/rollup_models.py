"""Metrics rollups: counters and time-to-decision histograms of closed approvals.

Written by ``approvals.rollups`` in the transaction that closes an approval, read by
``console.metrics``. Every row belongs to a block of days: ``level`` L covers the 2**L UTC days
``block * 2**L ..`` (days counted from 1970-01-01, by the approval's ``created_at``), so any
window of whole days is the sum of at most 2 * LEVELS blocks, whatever its length.
"""

from __future__ import annotations

from django.db import models


class MetricsCount(models.Model):
    """How many closed approvals of one block fall in a cell (dimension, key, outcome).

    Dimensions: ``tier``, ``tool``, ``agent``, ``reviewer`` (key: its value); ``ttd`` (key: the
    index of the page's time-to-decision bar, outcome ""); ``day`` (level 0 only, block: the
    decision's date in the console time zone, key "").
    """

    level = models.PositiveSmallIntegerField()
    block = models.IntegerField()
    dimension = models.CharField(max_length=10)
    group_key = models.CharField(max_length=150)
    outcome = models.CharField(max_length=10)
    n = models.BigIntegerField(default=0)
    escalated = models.BigIntegerField(default=0)
    reminded = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["level", "block", "dimension", "group_key", "outcome"],
                name="metrics_count_cell",
            )
        ]

    def __str__(self) -> str:
        return f"{self.dimension}={self.group_key} {self.outcome} L{self.level}:{self.block}"


class MetricsBucket(models.Model):
    """Decisions by a person in one log bucket of time to decision (see rollups.bucket_of)."""

    level = models.PositiveSmallIntegerField()
    block = models.IntegerField()
    dimension = models.CharField(max_length=10)
    group_key = models.CharField(max_length=150)
    bucket = models.IntegerField()
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["level", "block", "dimension", "group_key", "bucket"],
                name="metrics_bucket_cell",
            )
        ]

    def __str__(self) -> str:
        return f"{self.dimension}={self.group_key} b{self.bucket} L{self.level}:{self.block}"
