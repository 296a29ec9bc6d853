"""Reviewer pages, mounted at "/"."""

from __future__ import annotations

from django.urls import path

from approvals import views, views_claims

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("approvals/<int:pk>/", views.approval_detail, name="detail"),
    path("approvals/<int:pk>/decide/", views.approval_decide_view, name="decide"),
    path("approvals/<int:pk>/edit-preview/", views.approval_edit_preview, name="edit-preview"),
    path("approvals/<int:pk>/claim/", views_claims.approval_claim_view, name="claim"),
    path("approvals/<int:pk>/release/", views_claims.approval_release_view, name="claim-release"),
    path("approvals/<int:pk>/assign/", views_claims.approval_assign_view, name="assign"),
    path("approvals/<int:pk>/unassign/", views_claims.approval_unassign_view, name="unassign"),
]
