"""
HTTP Basic authentication for scripts, fast: a password checked once is remembered a while.

Django hashes a password on purpose slowly (PBKDF2, about a second on this kind of machine), so
DRF's `BasicAuthentication` costs that on every request. `CachedBasicAuthentication` checks a
username and password the usual way once, then remembers for `CACHE_SECONDS` that this pair
(as an HMAC under the site's `SECRET_KEY`, never the password) belongs to that user and that
password hash: a changed password, or a deactivated account, is refused at once. A wrong
password is never remembered, so guessing stays as slow as before.
"""

import hashlib
import hmac

from django.conf import settings
from django.contrib.auth import get_user_model
from django.core.cache import cache
from rest_framework.authentication import BasicAuthentication

CACHE_SECONDS = 300
_PREFIX = "ai_assistant.web.basic:"


def _key(userid, password):
    digest = hmac.new(settings.SECRET_KEY.encode(), f"{userid}\0{password}".encode(),
                      hashlib.sha256).hexdigest()
    return _PREFIX + digest


class CachedBasicAuthentication(BasicAuthentication):
    """DRF's Basic authentication, with a successful check remembered (see the module)."""

    def authenticate_credentials(self, userid, password, request=None):
        key = _key(userid, password)
        remembered = cache.get(key)
        if remembered is not None:
            user_pk, password_hash = remembered
            user = get_user_model().objects.filter(pk=user_pk).first()
            if user is not None and user.is_active and user.password == password_hash:
                return user, None
            cache.delete(key)
        user, auth = super().authenticate_credentials(userid, password, request)
        cache.set(key, (user.pk, user.password), CACHE_SECONDS)
        return user, auth
