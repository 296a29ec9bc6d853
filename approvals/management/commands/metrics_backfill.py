"""Rebuild the metrics rollups from the approvals table (run once after migrating to 0013)."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from approvals.rollup_rebuild import rollups_rebuild


class Command(BaseCommand):
    help = (
        "Rebuild the metrics rollups (approvals/rollup_models.py) from every closed approval, "
        "from scratch: safe to run again; decisions made meanwhile wait and are counted once."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--batch", type=int, default=50_000, help="approvals read per batch (default 50000)"
        )

    def handle(self, *args: Any, batch: int, **options: Any) -> None:
        if batch < 1:
            raise CommandError("--batch must be a positive number")
        self.stdout.write("Rebuilding the metrics rollups ...")
        total = rollups_rebuild(batch=batch, progress=self.stdout.write)
        self.stdout.write(self.style.SUCCESS(f"Done: {total:,} closed approvals counted."))
