"""Writes for the API's own objects: tokens."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import PermissionDenied
from django.db import transaction

from cbweb.api.models import PREFIX_CHARS, ApiToken, token_digest, token_new_key


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
