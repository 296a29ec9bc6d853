"""manage.py audit_verify [--file export.jsonl]: recompute the hash chain, report the first
broken seq, exit non-zero when anything fails."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError
from django.db import DatabaseError

from audit.models import AuditEvent, AuditExport
from audit.verify import chain_verify_db, export_file_verify


class Command(BaseCommand):
    help = "Verify the audit hash chain in the database, or an exported JSONL file offline."

    def add_arguments(self, parser) -> None:
        parser.add_argument("--file", help="an export.jsonl to check from the file alone")
        parser.add_argument(
            "--offline",
            action="store_true",
            help="with --file: do not compare with the export manifest in the database",
        )

    def handle(self, *args: Any, **options: Any) -> None:
        if options["file"]:
            self._verify_file(options["file"], offline=options["offline"])
            return
        result = chain_verify_db()
        if not result.ok:
            raise CommandError(f"BROKEN at seq {result.broken_seq}: {result.reason}")
        self.stdout.write(
            f"OK: {result.count} events, head seq {result.last_seq or 0}, head hash {result.head_hash}"
        )

    def _verify_file(self, path: str, *, offline: bool) -> None:
        try:
            with open(path, "rb") as handle:
                result, info = export_file_verify(handle)
        except OSError as exc:
            raise CommandError(f"cannot read {path}: {exc}") from exc
        if not result.ok:
            where = f"seq {result.broken_seq}" if result.broken_seq is not None else "the file"
            raise CommandError(f"BROKEN at {where}: {result.reason}")
        self.stdout.write(
            f"OK: {result.count} events (seq {result.first_seq}..{result.last_seq}), "
            f"export {info.get('export_id')}, head seq {info.get('head_seq')}, "
            f"digest {info.get('digest')}, file sha256 {info.get('file_sha256')}"
        )
        if not offline:
            self._compare_manifest(info)

    def _compare_manifest(self, info: dict[str, Any]) -> None:
        """The file alone proves it is self-consistent; the manifest and the chain prove it is
        the file that was exported."""
        try:
            export = AuditExport.objects.filter(pk=info.get("export_id")).first()
            head = AuditEvent.objects.filter(seq=info.get("head_seq")).values("hash").first()
        except DatabaseError as exc:
            self.stdout.write(f"manifest not checked: database unavailable ({exc})")
            return
        if export is None:
            self.stdout.write("manifest not checked: this database has no such export")
            return
        expected = {
            "row_count": (export.row_count, info.get("count")),
            "first_seq": (export.first_seq, info.get("first_seq")),
            "last_seq": (export.last_seq, info.get("last_seq")),
            "head_hash": (export.head_hash, info.get("head_hash")),
            "digest": (export.digest, info.get("digest")),
            "file_sha256": (export.file_sha256, info.get("file_sha256")),
        }
        wrong = [name for name, (stored, found) in expected.items() if stored != found]
        if head is not None and head["hash"] != info.get("head_hash"):
            wrong.append("chain head hash")
        if wrong:
            raise CommandError(f"MISMATCH with manifest #{export.pk}: {', '.join(wrong)}")
        self.stdout.write(
            f"manifest #{export.pk} matches: row count, seqs, head, digest, file sha256"
        )
