"""The append-only, hash-chained audit trail."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class AuditEventQuerySet(models.QuerySet):
    def update(self, **kwargs):  # noqa: ARG002
        raise PermissionError("audit events are append-only: update is refused")

    def delete(self):
        raise PermissionError("audit events are append-only: delete is refused")


class AuditEvent(models.Model):
    """One immutable fact: who did what, when, to which run or approval."""

    seq = models.BigIntegerField(unique=True)
    at = models.DateTimeField(db_index=True)
    actor = models.CharField(max_length=200, db_index=True)
    actor_user_id = models.BigIntegerField(null=True, blank=True)
    actor_username = models.CharField(max_length=150, blank=True)
    action = models.CharField(max_length=80, db_index=True)
    run_id = models.UUIDField(null=True, blank=True, db_index=True)
    approval_id = models.BigIntegerField(null=True, blank=True, db_index=True)
    tool = models.CharField(max_length=100, blank=True, db_index=True)
    data = models.JSONField(default=dict)
    ip = models.GenericIPAddressField(null=True, blank=True)
    user_agent = models.CharField(max_length=300, blank=True)
    prev_hash = models.CharField(max_length=64)
    hash = models.CharField(max_length=64)
    # 1: hash over canonical_json of the fields (rows written before chain versions existed);
    # 2: hash over `canonical`, the RFC 8785 text of the record, stored verbatim (docs/audit.md).
    # Added by plain ALTER TABLE ADD COLUMN (migration 0005): no row is rewritten.
    chain_version = models.SmallIntegerField(default=1)
    # NULL on version 1 rows: they have no stored text (and "" would be a text, hashed or not).
    canonical = models.TextField(null=True, blank=True)  # noqa: DJ001

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        # The tool + date filter's range (migration 0007, built concurrently on Postgres).
        indexes = [models.Index(fields=["tool", "at", "seq"], name="audit_tool_at_seq")]
        permissions = [("view_audit", "Can view and export the whole audit trail")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise PermissionError("audit events are append-only: update is refused")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("audit events are append-only: delete is refused")


class AuditExport(models.Model):
    """The manifest of one export: enough to check the file against the chain years later."""

    class Format(models.TextChoices):
        CSV = "csv", "CSV"
        JSONL = "jsonl", "JSONL"

    class Status(models.TextChoices):
        STREAMING = "streaming"
        COMPLETE = "complete"

    created_at = models.DateTimeField(db_index=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        on_delete=models.SET_NULL,
        null=True,
        blank=True,
        related_name="audit_exports",
    )
    created_by_label = models.CharField(max_length=150)
    format = models.CharField(max_length=5, choices=Format.choices)
    filters = models.JSONField(default=dict, blank=True)
    # The chain head when the export started; the file holds only events up to it.
    head_seq = models.BigIntegerField()
    head_hash = models.CharField(max_length=64)
    # The file also carries each event's data with its sealed keys opened (compliance's choice).
    opened = models.BooleanField(default=False)
    status = models.CharField(max_length=10, choices=Status.choices, default=Status.STREAMING)
    row_count = models.BigIntegerField(null=True, blank=True)
    first_seq = models.BigIntegerField(null=True, blank=True)
    last_seq = models.BigIntegerField(null=True, blank=True)
    # sha256 chained over the exported event hashes (see docs/audit.md) and of the file bytes.
    digest = models.CharField(max_length=64, blank=True)
    file_sha256 = models.CharField(max_length=64, blank=True)
    completed_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-id"]

    def __str__(self) -> str:
        return f"export #{self.pk} ({self.format}, {self.status})"
