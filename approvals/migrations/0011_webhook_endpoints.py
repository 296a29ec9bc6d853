"""Webhook endpoints with a signing secret; each tier's webhook_url becomes an endpoint.

The schema change that follows (0012) runs in its own transaction: Postgres refuses to alter a
table with pending deferred-constraint events from this migration's updates.
"""

import uuid

import django.db.models.deletion
from django.db import migrations, models

import approvals.notification_models


def tier_urls_to_endpoints(apps, schema_editor):
    RiskTier = apps.get_model("approvals", "RiskTier")
    WebhookEndpoint = apps.get_model("approvals", "WebhookEndpoint")
    Notification = apps.get_model("approvals", "Notification")
    for tier in RiskTier.objects.exclude(webhook_url="").order_by("level", "pk"):
        endpoint = WebhookEndpoint.objects.filter(url=tier.webhook_url).first()
        if endpoint is None:
            endpoint = WebhookEndpoint.objects.create(
                name=f"{tier.name} webhook"[:100], url=tier.webhook_url
            )
        tier.webhook_endpoint = endpoint
        tier.save(update_fields=["webhook_endpoint"])
        # Pending retries of the old unsigned webhook are signed from now on.
        Notification.objects.filter(channel="webhook", recipient=tier.webhook_url).update(
            endpoint=endpoint
        )
    for pk in Notification.objects.filter(message_id__isnull=True).values_list("pk", flat=True):
        Notification.objects.filter(pk=pk).update(message_id=uuid.uuid4())


def endpoints_to_tier_urls(apps, schema_editor):
    RiskTier = apps.get_model("approvals", "RiskTier")
    for tier in RiskTier.objects.exclude(webhook_endpoint=None).select_related("webhook_endpoint"):
        tier.webhook_url = tier.webhook_endpoint.url
        tier.save(update_fields=["webhook_url"])


class Migration(migrations.Migration):
    dependencies = [
        ("approvals", "0010_run_lease_epoch"),
    ]

    operations = [
        migrations.CreateModel(
            name="WebhookEndpoint",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("name", models.CharField(max_length=100, unique=True)),
                (
                    "url",
                    models.URLField(
                        help_text="Receives a signed JSON POST per event.", max_length=500
                    ),
                ),
                (
                    "secret",
                    models.CharField(
                        default=approvals.notification_models.webhook_secret_new,
                        help_text="Signs every request (Standard Webhooks, HMAC-SHA256); give it to the receiver.",
                        max_length=100,
                    ),
                ),
                (
                    "is_active",
                    models.BooleanField(default=True, help_text="Off: nothing is sent to it."),
                ),
                ("created_at", models.DateTimeField(auto_now_add=True)),
            ],
            options={"ordering": ["name"]},
        ),
        migrations.AddField(
            model_name="risktier",
            name="webhook_endpoint",
            field=models.ForeignKey(
                blank=True,
                help_text="Signed JSON POST with a Slack-compatible 'text' for every event.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="tiers",
                to="approvals.webhookendpoint",
            ),
        ),
        migrations.AddField(
            model_name="notification",
            name="endpoint",
            field=models.ForeignKey(
                blank=True,
                help_text="Webhook only: its secret signs every attempt.",
                null=True,
                on_delete=django.db.models.deletion.SET_NULL,
                related_name="notifications",
                to="approvals.webhookendpoint",
            ),
        ),
        migrations.AddField(
            model_name="notification",
            name="message_id",
            field=models.UUIDField(editable=False, null=True),
        ),
        migrations.RunPython(tier_urls_to_endpoints, endpoints_to_tier_urls),
    ]
