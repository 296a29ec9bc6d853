from __future__ import annotations

from django.urls import path

from approvals.api import ApprovalDecideApi, ApprovalDetailApi, ApprovalListApi
from approvals.api_batches import ApprovalBatchDecideApi, ApprovalBatchListApi
from approvals.api_claims import ApprovalAssignApi, ApprovalClaimApi
from approvals.autonomy_api import (
    AutonomousActionDetailApi,
    AutonomousActionListApi,
    AutonomousActionReviewApi,
)
from approvals.canary_api import CanaryReportApi

app_name = "approvals_api"

urlpatterns = [
    path("approvals/", ApprovalListApi.as_view(), name="list"),
    # Before "approvals/<approval_id>/", which would take these words for an id.
    path("approvals/batches/", ApprovalBatchListApi.as_view(), name="batches"),
    path("approvals/batch-decision/", ApprovalBatchDecideApi.as_view(), name="batch-decide"),
    path("approvals/<str:approval_id>/", ApprovalDetailApi.as_view(), name="detail"),
    path("approvals/<str:approval_id>/decision/", ApprovalDecideApi.as_view(), name="decide"),
    path("approvals/<str:approval_id>/claim/", ApprovalClaimApi.as_view(), name="claim"),
    path("approvals/<str:approval_id>/assign/", ApprovalAssignApi.as_view(), name="assign"),
    # Review after the fact (docs/autonomy.md).
    path("autonomous-actions/", AutonomousActionListApi.as_view(), name="autonomous-actions"),
    path(
        "autonomous-actions/<str:action_id>/",
        AutonomousActionDetailApi.as_view(),
        name="autonomous-action",
    ),
    path(
        "autonomous-actions/<str:action_id>/review/",
        AutonomousActionReviewApi.as_view(),
        name="autonomous-action-review",
    ),
    path("canaries/report/", CanaryReportApi.as_view(), name="canaries-report"),
]
