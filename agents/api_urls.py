from __future__ import annotations

from django.urls import path

from agents.api import AgentListApi, RunCancelApi, RunCollectionApi, RunDetailApi

app_name = "agents_api"

urlpatterns = [
    path("agents/", AgentListApi.as_view(), name="agents"),
    path("runs/", RunCollectionApi.as_view(), name="runs"),
    path("runs/<str:run_id>/", RunDetailApi.as_view(), name="run-detail"),
    path("runs/<str:run_id>/cancel/", RunCancelApi.as_view(), name="run-cancel"),
]
