"""API sign-in (token) and the API's own documentation."""

from __future__ import annotations

from django.contrib.auth import authenticate
from django.db import IntegrityError
from drf_spectacular.utils import extend_schema, extend_schema_serializer
from rest_framework import serializers
from rest_framework.authtoken.models import Token
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from approvals.api import ErrorSerializer, error_response


class TokenObtainApi(APIView):
    """Exchange a username and password for the user's API token (send it as `Token <key>`)."""

    authentication_classes: list = []
    permission_classes = [AllowAny]

    @extend_schema_serializer(component_name="TokenInput")
    class InputSerializer(serializers.Serializer):
        username = serializers.CharField()
        password = serializers.CharField(trim_whitespace=False, style={"input_type": "password"})

    @extend_schema_serializer(component_name="Token")
    class OutputSerializer(serializers.Serializer):
        token = serializers.CharField()

    @extend_schema(
        operation_id="auth_token",
        request=InputSerializer,
        responses={200: OutputSerializer, 400: ErrorSerializer},
    )
    def post(self, request: Request) -> Response:
        serializer = self.InputSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        user = authenticate(
            request=request._request,
            username=serializer.validated_data["username"],
            password=serializer.validated_data["password"],
        )
        if user is None or not user.is_active:
            return error_response(
                status_code=400,
                detail="Unable to log in with these credentials.",
                errors={"non_field_errors": "wrong username or password"},
            )
        try:
            token, _ = Token.objects.get_or_create(user=user)
        except IntegrityError:  # a concurrent request created it first
            token = Token.objects.get(user=user)
        return Response(self.OutputSerializer({"token": token.key}).data)
