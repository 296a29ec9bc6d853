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


class MetricsHistogram(models.Model):
    """One cell's time-to-decision histogram: decisions by a person per log bucket
    (see rollups.bucket_of), as a JSON object ``{"<bucket>": n}``, so a report reads one row
    per block and key instead of one per bucket (bench/metrics.py measured both)."""

    level = models.PositiveSmallIntegerField()
    block = models.IntegerField()
    dimension = models.CharField(max_length=10)
    group_key = models.CharField(max_length=150)
    counts = models.JSONField(default=dict)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["level", "block", "dimension", "group_key"],
                name="metrics_histogram_cell",
            )
        ]

    def __str__(self) -> str:
        return f"{self.dimension}={self.group_key} L{self.level}:{self.block}"


class MetricsBucket(models.Model):
    """The histograms read as one row per bucket (a database view over MetricsHistogram, for
    tests and ad-hoc queries; read-only, and ``id`` is the histogram's: read with values)."""

    id = models.BigIntegerField(primary_key=True)
    level = models.PositiveSmallIntegerField()
    block = models.IntegerField()
    dimension = models.CharField(max_length=10)
    group_key = models.CharField(max_length=150)
    bucket = models.IntegerField()
    n = models.BigIntegerField()

    class Meta:
        managed = False
        db_table = "approvals_metricsbucket"

    def __str__(self) -> str:
        return f"{self.dimension}={self.group_key} b{self.bucket} L{self.level}:{self.block}"


class RunStatusCount(models.Model):
    """Runs created on one UTC day (days since 1970-01-01) that have one status, as of the last
    compaction (approvals/rollup_runs.py); RunStatusDelta holds the changes since."""

    day = models.IntegerField()
    status = models.CharField(max_length=12)
    n = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["day", "status"], name="run_status_count_cell")
        ]

    def __str__(self) -> str:
        return f"{self.status} on day {self.day}: {self.n}"


class RunStatusDelta(models.Model):
    """One change of a run's status (+1 for the new, -1 for the old), appended by a database
    trigger on approvals_agentrun in the changing transaction; folded into RunStatusCount."""

    id = models.BigAutoField(primary_key=True)
    day = models.IntegerField()
    status = models.CharField(max_length=12)
    n = models.SmallIntegerField()

    class Meta:
        indexes = [models.Index(fields=["day"], name="run_status_delta_day")]

    def __str__(self) -> str:
        return f"{self.status} on day {self.day}: {self.n:+d}"


class PendingApprovalCount(models.Model):
    """Pending approvals created on one UTC day with one tier, tool and agent (the run's), with
    how many of them were escalated and reminded, as of the last compaction
    (approvals/rollup_pending.py); PendingApprovalDelta holds the changes since."""

    day = models.IntegerField()
    tier = models.CharField(max_length=40)
    tool = models.CharField(max_length=100)
    agent = models.CharField(max_length=100)
    n = models.BigIntegerField(default=0)
    escalated = models.BigIntegerField(default=0)
    reminded = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["day", "tier", "tool", "agent"], name="pending_approval_count_cell"
            )
        ]

    def __str__(self) -> str:
        return f"{self.tier}/{self.tool}/{self.agent} on day {self.day}: {self.n}"


class PendingApprovalDelta(models.Model):
    """One approval entering (+1) or leaving (-1) the pending cell it counts in, appended by a
    database trigger on approvals_approvalrequest in the changing transaction."""

    id = models.BigAutoField(primary_key=True)
    day = models.IntegerField()
    tier = models.CharField(max_length=40)
    tool = models.CharField(max_length=100)
    # Postgres: the run's agent, read by the trigger. SQLite: null, and ``run_id`` says whose:
    # a SQLite trigger naming approvals_agentrun would make every remake of that table fail
    # (its RENAME checks the triggers while the table is gone), so the agent is read when the
    # delta is folded or read (approvals/rollup_pending.py).
    agent = models.CharField(max_length=100, null=True)  # noqa: DJ001 - null: not read yet
    run_id = models.CharField(max_length=36, blank=True)
    n = models.SmallIntegerField()
    escalated = models.SmallIntegerField()
    reminded = models.SmallIntegerField()

    class Meta:
        indexes = [models.Index(fields=["day"], name="pending_approval_delta_day")]

    def __str__(self) -> str:
        return f"{self.tier}/{self.tool}/{self.agent} on day {self.day}: {self.n:+d}"
