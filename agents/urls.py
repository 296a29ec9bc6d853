"""Run pages, mounted at "/runs/"."""

from __future__ import annotations

from django.urls import path

from agents import views

app_name = "agents"

urlpatterns = [
    path("", views.run_list_view, name="runs"),
    path("new/", views.run_new, name="run-new"),
    path("<uuid:pk>/", views.run_detail, name="run"),
    path("<uuid:pk>/cancel/", views.run_cancel_view, name="run-cancel"),
    path("<uuid:pk>/steps/<str:checkpoint_id>/", views.run_step, name="run-step"),
    path("<uuid:pk>/fork/", views.run_fork_view, name="run-fork"),
    path(
        "<uuid:pk>/effects/<int:effect_id>/settle/",
        views.effect_settle_view,
        name="effect-settle",
    ),
]
