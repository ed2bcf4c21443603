"""Token authentication against hashed keys, with failed attempts throttled per client address."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import TokenAuthentication

from cbweb.api.models import ApiToken, token_digest
from cbweb.api.throttles import FailureThrottle

# last_used_at is refreshed at most this often: a write per API call would be a write per read.
LAST_USED_RESOLUTION = timedelta(minutes=5)


class HashedTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``: the key's SHA-256 is looked up (the key itself is never stored).

    The lookup is one indexed equality on the digest, so its timing says nothing about the key. A
    client that sent CB_THROTTLE_AUTH_FAILURES wrong tokens gets 429 (Retry-After) until the window
    moves on, whatever it sends meanwhile.
    """

    model = ApiToken

    def authenticate(self, request: Any) -> tuple[Any, ApiToken] | None:
        throttle = FailureThrottle(scope="auth_failure", setting="CB_THROTTLE_AUTH_FAILURES", request=request)
        try:
            result = super().authenticate(request)
        except exceptions.AuthenticationFailed:
            if throttle.blocked():
                raise exceptions.Throttled(wait=throttle.wait()) from None
            throttle.record_failure()
            raise
        if result is not None and throttle.blocked():
            # Even the right token waits: otherwise a throttled client could tell a hit from a miss.
            raise exceptions.Throttled(wait=throttle.wait())
        return result

    def authenticate_credentials(self, key: str) -> tuple[Any, ApiToken]:
        token = ApiToken.objects.select_related("user").filter(digest=token_digest(key)).first()
        if token is None:
            raise exceptions.AuthenticationFailed("invalid token")
        if not token.user.is_active:
            raise exceptions.AuthenticationFailed("the token's user is inactive")
        now = timezone.now()
        if token.last_used_at is None or now - token.last_used_at > LAST_USED_RESOLUTION:
            ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
        return token.user, token
