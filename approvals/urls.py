"""Reviewer pages, mounted at "/"."""

from __future__ import annotations

from django.urls import path

from approvals import views

app_name = "approvals"

urlpatterns = [
    path("", views.queue, name="queue"),
    path("approvals/<int:pk>/", views.approval_detail, name="detail"),
    path("approvals/<int:pk>/decide/", views.approval_decide_view, name="decide"),
    path("approvals/<int:pk>/edit-preview/", views.approval_edit_preview, name="edit-preview"),
]
