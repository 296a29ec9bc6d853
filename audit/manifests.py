"""Export manifests: opened at the chain head with "export.created", completed with the file's
digests in "export.completed" (both in the chain)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from django.db import transaction
from django.utils import timezone

from audit.models import AuditExport
from audit.services import _head, _lock_head, event_record


def export_start(
    *,
    user: Any,
    format: str,
    filters: Mapping[str, str],
    opened: bool = False,
    request: Any = None,
) -> AuditExport:
    """Open an export's manifest at the current chain head and audit it ("export.created").
    ``opened``: the file also carries each event's data with its sealed keys opened (or
    "erased"), for compliance; the hashed fields stay as stored."""
    with transaction.atomic():
        _lock_head()
        head_seq, head_hash = _head()
        export = AuditExport.objects.create(
            created_at=timezone.now(),
            created_by=user,
            created_by_label=user.get_username(),
            format=format,
            filters=dict(filters),
            head_seq=head_seq,
            head_hash=head_hash,
            opened=opened,
        )
        event_record(
            action="export.created",
            actor=user,
            data={
                "export_id": export.pk,
                "format": format,
                "filters": dict(filters),
                "head_seq": head_seq,
                "head_hash": head_hash,
                **({"opened": True} if opened else {}),
            },
            request=request,
        )
    return export


def export_complete(
    *,
    export: AuditExport,
    row_count: int,
    first_seq: int | None,
    last_seq: int | None,
    digest: str,
    file_sha256: str,
) -> AuditExport:
    """Fill the manifest once the file is written and put its digests in the chain."""
    with transaction.atomic():
        export.row_count = row_count
        export.first_seq = first_seq
        export.last_seq = last_seq
        export.digest = digest
        export.file_sha256 = file_sha256
        export.status = AuditExport.Status.COMPLETE
        export.completed_at = timezone.now()
        export.save(
            update_fields=[
                "row_count",
                "first_seq",
                "last_seq",
                "digest",
                "file_sha256",
                "status",
                "completed_at",
            ]
        )
        event_record(
            action="export.completed",
            actor=export.created_by or f"system:export-{export.pk}",
            data={
                "export_id": export.pk,
                "format": export.format,
                "row_count": row_count,
                "first_seq": first_seq,
                "last_seq": last_seq,
                "digest": digest,
                "file_sha256": file_sha256,
            },
        )
    return export
