"""The append-only, hash-chained audit trail."""

from __future__ import annotations

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

    objects = AuditEventQuerySet.as_manager()

    class Meta:
        ordering = ["seq"]
        permissions = [("view_audit", "Can view and export the whole audit trail")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.action} by {self.actor}"

    def save(self, *args, **kwargs):
        if not self._state.adding:
            raise PermissionError("audit events are append-only: update is refused")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise PermissionError("audit events are append-only: delete is refused")
