from __future__ import annotations

from django.apps import AppConfig
from django.db.models.signals import post_migrate


def _compliance_group(sender, using: str = "default", **kwargs) -> None:
    # The data migration creates the group; this keeps it after a test flush, which empties
    # auth tables and then re-emits post_migrate (as contrib.auth does for permissions).
    from audit.services import compliance_group_ensure

    compliance_group_ensure(using=using)


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit trail"

    def ready(self) -> None:
        post_migrate.connect(_compliance_group, sender=self, dispatch_uid="audit_compliance_group")
