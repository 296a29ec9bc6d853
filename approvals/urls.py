"""Reviewer pages, mounted at "/"."""

from __future__ import annotations

from django.urls import path

from approvals import (
    autonomy_views,
    canary_views,
    link_views,
    slack_views,
    views,
    views_batches,
    views_claims,
)

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("approvals/<int:pk>/", views.approval_detail, name="detail"),
    path("approvals/<int:pk>/decide/", views.approval_decide_view, name="decide"),
    path("approvals/<int:pk>/edit-preview/", views.approval_edit_preview, name="edit-preview"),
    # Deciding from where one is (docs/security.md): signed e-mail links, Slack buttons.
    path("links/<str:token>/", link_views.decision_link, name="decision-link"),
    path(
        "links/<str:token>/decide/",
        link_views.decision_link_decide_view,
        name="decision-link-decide",
    ),
    path(
        "integrations/slack/<int:endpoint_id>/interactions/",
        slack_views.slack_interactions,
        name="slack-interactions",
    ),
    # Related approvals decided together (approvals/batch_selectors.py).
    path("batches/", views_batches.batch_list_view, name="batches"),
    path("batches/<str:agent>/<str:tool>/<str:tier>/", views_batches.batch_detail, name="batch"),
    path(
        "batches/<str:agent>/<str:tool>/<str:tier>/decide/",
        views_batches.batch_decide_view,
        name="batch-decide",
    ),
    path("approvals/<int:pk>/claim/", views_claims.approval_claim_view, name="claim"),
    path("approvals/<int:pk>/release/", views_claims.approval_release_view, name="claim-release"),
    path("approvals/<int:pk>/assign/", views_claims.approval_assign_view, name="assign"),
    path("approvals/<int:pk>/unassign/", views_claims.approval_unassign_view, name="unassign"),
    # Review after the fact (docs/autonomy.md): actions that ran without waiting.
    path("after/", autonomy_views.after_queue, name="after-queue"),
    path("after/<int:action_id>/", autonomy_views.after_detail, name="after-detail"),
    path("after/<int:action_id>/review/", autonomy_views.after_review, name="after-review"),
    # Compliance's canary report (docs/autonomy.md).
    path("canaries/", canary_views.canary_report_view, name="canaries"),
]
