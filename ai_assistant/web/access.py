"""Who may use the inspector: staff, that is Builder or higher by Evennia permission."""

from evennia.locks.lockhandler import check_perm
from rest_framework import permissions

STAFF_PERMISSION = "Builder"


def is_staff(user):
    """
    Whether a website user is staff: a superuser, or an account with the Builder permission
    or one above it in `settings.PERMISSION_HIERARCHY`.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return False
    return bool(user.is_superuser or check_perm(user, STAFF_PERMISSION))


class IsAssistantStaff(permissions.BasePermission):
    """DRF permission: staff only. Anonymous requests get 401 (or 403), players 403."""

    message = "The memory inspector is for staff (Builder or higher)."

    def has_permission(self, request, view):
        return is_staff(request.user)
