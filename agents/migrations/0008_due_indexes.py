"""Partial indexes for the sweep's effect passes (agents/effects/reconcile.py): the unsettled
effects oldest first, and the escalated ones whose tier is still blank."""

from __future__ import annotations

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("agents", "0007_effect_tier"),
    ]

    operations = [
        migrations.AddIndex(
            model_name="effect",
            index=models.Index(
                condition=models.Q(("status__in", ["claimed", "in_doubt"])),
                fields=["updated_at", "id"],
                name="effect_unsettled_due",
            ),
        ),
        migrations.AddIndex(
            model_name="effect",
            index=models.Index(
                condition=models.Q(("escalated_at__isnull", False), ("tier", "")),
                fields=["id"],
                name="effect_tier_blank",
            ),
        ),
    ]
