"""Writes for the API's own objects: tokens."""

from __future__ import annotations

from typing import Any

from django.db import transaction

from cbweb.api.models import PREFIX_CHARS, ApiToken, token_digest, token_new_key


@transaction.atomic
def token_create(*, user: Any, name: str = "") -> tuple[ApiToken, str]:
    """Create an API token for ``user``; return it with its key, which is stored only as a digest
    and cannot be shown again."""
    key = token_new_key()
    token = ApiToken.objects.create(user=user, name=name, prefix=key[:PREFIX_CHARS], digest=token_digest(key))
    return token, key
