"""API permissions. The default is to deny; each endpoint names the role it serves."""

from typing import TYPE_CHECKING

from rest_framework.permissions import BasePermission

from annotation.models import Role
from annotation.roles import has_role

if TYPE_CHECKING:
    from rest_framework.request import Request
    from rest_framework.views import APIView


class DenyAll(BasePermission):
    def has_permission(self, request: "Request", view: "APIView") -> bool:
        return False


class _HasRole(BasePermission):
    role: str

    def has_permission(self, request: "Request", view: "APIView") -> bool:
        return has_role(request.user, self.role)


class IsCoordinator(_HasRole):
    role = Role.COORDINATOR


class IsReaderOrJudge(BasePermission):
    """The reader API: radiologists, and automated judges (which read through the API only)."""

    def has_permission(self, request: "Request", view: "APIView") -> bool:
        return has_role(request.user, Role.READER) or has_role(request.user, Role.JUDGE)


class IsDataManager(_HasRole):
    role = Role.DATA_MANAGER


class IsAdjudicator(_HasRole):
    role = Role.ADJUDICATOR
