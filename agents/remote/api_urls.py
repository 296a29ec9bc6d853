from __future__ import annotations

from django.urls import path

from agents.remote.api import (
    RemoteRequestCollectionApi,
    RemoteRequestDetailApi,
    RemoteRequestOutcomeApi,
)
from agents.remote.api_threads import RemoteThreadFinishApi

app_name = "remote_api"

urlpatterns = [
    path("approval-requests/", RemoteRequestCollectionApi.as_view(), name="requests"),
    # Before the request's own route: "threads" is no request id.
    path(
        "approval-requests/threads/finish/",
        RemoteThreadFinishApi.as_view(),
        name="thread_finish",
    ),
    path("approval-requests/<str:request_id>/", RemoteRequestDetailApi.as_view(), name="request"),
    path(
        "approval-requests/<str:request_id>/outcome/",
        RemoteRequestOutcomeApi.as_view(),
        name="outcome",
    ),
]
