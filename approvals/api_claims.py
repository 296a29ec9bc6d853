"""Approvals API: claim, release, assign and unassign (the same services as the page)."""

from __future__ import annotations

from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_serializer
from rest_framework import serializers, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api import APPROVAL_ID, approval_or_404
from approvals.serializers import ClaimSerializer
from approvals.services import claims
from core.rest import ErrorSerializer

# An approval one may not see is not found (ids are sequential); one may see but not claim or
# assign gets the service's 403 naming why; a decided or expired one 409.
REFUSALS = {
    403: ErrorSerializer,
    404: ErrorSerializer,
    409: OpenApiResponse(
        ErrorSerializer, description="Decided or expired, or someone else holds it."
    ),
}


class ApprovalClaimApi(APIView):
    @extend_schema(
        operation_id="approvals_claim",
        parameters=[APPROVAL_ID],
        request=None,
        responses={200: ClaimSerializer, **REFUSALS},
        description="Claim a pending approval you may decide (or renew your claim): others "
        "see you are looking at it until it lapses (APPROVAL_CLAIM_SECONDS). It never "
        "blocks anyone's decision.",
    )
    def post(self, request: Request, approval_id: str) -> Response:
        approval = approval_or_404(approval_id, fetched_by=request.user)
        claim = claims.approval_claim(approval=approval, user=request.user, request=request)
        return Response(ClaimSerializer(claim).data)

    @extend_schema(
        operation_id="approvals_claim_release",
        parameters=[APPROVAL_ID],
        responses={204: None, **REFUSALS},
        description="Release your claim, or hand back an approval assigned to you.",
    )
    def delete(self, request: Request, approval_id: str) -> Response:
        approval = approval_or_404(approval_id, fetched_by=request.user)
        claims.approval_claim_release(approval=approval, user=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)


class ApprovalAssignApi(APIView):
    @extend_schema_serializer(component_name="ApprovalAssignInput")
    class InputSerializer(serializers.Serializer):
        # Checked by the service, after the right to assign (a 403 comes before a 400).
        user = serializers.CharField(
            required=False,
            allow_blank=True,
            default="",
            help_text="Username of a reviewer who may decide it.",
        )

    @extend_schema(
        operation_id="approvals_assign",
        parameters=[APPROVAL_ID],
        request=InputSerializer,
        responses={200: ClaimSerializer, 400: ErrorSerializer, **REFUSALS},
        description="Assign a pending approval (admins and the tier's lead group) to a "
        "reviewer who may decide it; 400 names why one may not. An assignment does not lapse.",
    )
    def post(self, request: Request, approval_id: str) -> Response:
        approval = approval_or_404(approval_id, fetched_by=request.user)
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        claim = claims.approval_assign(
            approval=approval,
            username=serializer.validated_data["user"],
            by=request.user,
            request=request,
        )
        return Response(ClaimSerializer(claim).data)

    @extend_schema(
        operation_id="approvals_unassign",
        parameters=[APPROVAL_ID],
        responses={204: None, **REFUSALS},
    )
    def delete(self, request: Request, approval_id: str) -> Response:
        approval = approval_or_404(approval_id, fetched_by=request.user)
        claims.approval_unassign(approval=approval, by=request.user, request=request)
        return Response(status=status.HTTP_204_NO_CONTENT)
