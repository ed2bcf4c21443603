"""Writes for the API's own objects: tokens, and the responses kept for idempotent retries."""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, transaction
from django.utils import timezone

from cbweb.api.models import PREFIX_CHARS, ApiToken, IdempotencyKey, token_digest, token_new_key


@transaction.atomic
def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create an API token for ``user``; return it with its key, which is stored only as a digest
    and cannot be shown again."""
    key = token_new_key()
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:PREFIX_CHARS], digest=token_digest(key))
    return token, key


@transaction.atomic
def token_revoke(*, token: ApiToken, user: Any) -> None:
    """Delete a token; only its holder may (staff revoke others' in the admin, with its permissions).

    Raises PermissionDenied for someone else's token.
    """
    if token.user_id != user.pk:
        raise PermissionDenied("only the holder of a token may revoke it here")
    token.delete()


class IdempotencyKeyReused(Exception):
    """An Idempotency-Key sent again with another request (another body or operation): HTTP 422."""


@transaction.atomic
def idempotent_call(
    *, user: Any, key: str, endpoint: str, fingerprint: str, call: Callable[[], tuple[int, Any]]
) -> tuple[int, Any, bool]:
    """Return ``(status, body, replayed)``: the response ``user`` first got for ``key`` within
    CB_IDEMPOTENCY_HOURS (replayed True), or, for a key not seen in that window, what ``call`` returns,
    kept for the retries to come.

    The key is recorded in the transaction that ``call``'s writes join: a request that fails leaves
    no key behind (its retry runs anew), and a concurrent twin waits on the key's row until the first
    commits, then gets its response. Raises IdempotencyKeyReused when the key came with another
    ``endpoint`` or another body (``fingerprint``).
    """
    cutoff = timezone.now() - timedelta(hours=settings.CB_IDEMPOTENCY_HOURS)
    IdempotencyKey.objects.filter(user=user, created_at__lt=cutoff).delete()
    try:
        with transaction.atomic():
            record = IdempotencyKey.objects.create(
                user=user, key=key, endpoint=endpoint, fingerprint=fingerprint, status=0, body={}
            )
    except IntegrityError:
        first = IdempotencyKey.objects.get(user=user, key=key)
        if first.endpoint != endpoint or first.fingerprint != fingerprint:
            raise IdempotencyKeyReused(
                f"this Idempotency-Key was first used {first.created_at:%Y-%m-%d %H:%M:%S} UTC with a "
                f"different request ({first.endpoint}); send a new key for a new request"
            ) from None
        return first.status, first.body, True
    status, body = call()
    record.status, record.body = status, body
    record.save(update_fields=["status", "body"])
    return status, body, False
