from __future__ import annotations

from django.urls import path

from agents.remote.api import (
    RemoteRequestCollectionApi,
    RemoteRequestDetailApi,
    RemoteRequestOutcomeApi,
)

app_name = "remote_api"

urlpatterns = [
    path("approval-requests/", RemoteRequestCollectionApi.as_view(), name="requests"),
    path("approval-requests/<str:request_id>/", RemoteRequestDetailApi.as_view(), name="request"),
    path(
        "approval-requests/<str:request_id>/outcome/",
        RemoteRequestOutcomeApi.as_view(),
        name="outcome",
    ),
]
