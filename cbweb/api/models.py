"""API tokens, stored as SHA-256 digests: the key itself is shown once, when it is created.

A key is 43 random URL-safe characters (256 bits less the 0.02 of a bit lost to never starting with
"-"), so a plain SHA-256 is enough: there is nothing for a slow password hash to protect against that
that much randomness does not already.
"""

from __future__ import annotations

import hashlib
import secrets

from django.conf import settings
from django.db import models

# Characters of the key kept in clear to tell tokens apart in the admin; 6 of 43 leave 220 bits secret.
PREFIX_CHARS = 6


def token_digest(key: str) -> str:
    """Return the hex SHA-256 of a token key (what is stored and looked up)."""
    return hashlib.sha256(key.encode("utf-8", "surrogatepass")).hexdigest()


def token_new_key() -> str:
    """Return a fresh random token key, never starting with "-": one in 64 did, and then
    ``consumerbench submit --token KEY`` read the key as an option (argparse: "expected one argument")."""
    while (key := secrets.token_urlsafe(32)).startswith("-"):
        continue
    return key


class ApiToken(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True, help_text="what the token is for, e.g. ci")
    prefix = models.CharField(max_length=PREFIX_CHARS, help_text="first characters of the key")
    digest = models.CharField(max_length=64, unique=True, help_text="SHA-256 of the key (hex)")
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["user", "-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.prefix}… ({self.user})"


class IdempotencyKey(models.Model):
    """The first response to a write sent with an ``Idempotency-Key`` header, kept per user and key for
    CB_IDEMPOTENCY_HOURS so that a client's retry of the same request gets it again (docs/api.md)."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    key = models.CharField(max_length=255)
    endpoint = models.CharField(max_length=100, help_text="the operation the key was used on")
    fingerprint = models.CharField(max_length=64, help_text="SHA-256 of the request's body")
    status = models.PositiveSmallIntegerField()
    body = models.JSONField()
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "key"], name="idempotency_key_per_user")]
        indexes = [models.Index(fields=["created_at"])]

    def __str__(self) -> str:
        return f"{self.key} ({self.user}, {self.endpoint})"
