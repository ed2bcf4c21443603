"""Project-wide forms that belong to no app."""

from __future__ import annotations

import math
from typing import Any

from django import forms
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.forms import AuthenticationForm
from django.core.exceptions import ValidationError

from cbweb.api.throttles import FailureThrottle

# The largest id a database column holds (a 64-bit signed integer, PostgreSQL's bigint and SQLite's).
MAX_ID = 2**63 - 1


def _refuse_other_digits(field: forms.Field, value: Any, code: str) -> None:
    """Refuse a number a query spells with other than ASCII digits: Python's int() reads '١٢' (and
    str.isdigit passes '²'), so an id field would otherwise take them; and one no id column can hold
    (the database driver would fail on it)."""
    values = value if isinstance(value, list | tuple) else [value]
    for item in values:
        text = item.strip() if isinstance(item, str) else ""
        if text and not (text.isascii() and text.isdigit() and len(text) <= 19 and int(text) <= MAX_ID):
            raise ValidationError(
                field.error_messages[code], code=code, params={"value": item[:50], "pk": item[:50]}
            )


class IdChoiceField(forms.ModelChoiceField):
    """A model choice by id, written in ASCII digits."""

    def to_python(self, value: Any) -> Any:
        _refuse_other_digits(self, value, "invalid_choice")
        return super().to_python(value)


class IdMultipleChoiceField(forms.ModelMultipleChoiceField):
    """Model choices by id, each written in ASCII digits."""

    def clean(self, value: Any) -> Any:
        _refuse_other_digits(self, value, "invalid_pk_value")
        return super().clean(value)


class QueryIntegerField(forms.IntegerField):
    """An integer written in ASCII digits (a leading minus sign allowed; bounds as declared)."""

    def to_python(self, value: Any) -> int | None:
        _refuse_other_digits(
            self, value.strip().removeprefix("-") if isinstance(value, str) else value, "invalid"
        )
        return super().to_python(value)


class LoginThrottleMixin:
    """For Django's login forms: refuse a user name from one client address after
    CB_THROTTLE_LOGIN_FAILURES wrong passwords, and any login from an address past
    CB_THROTTLE_AUTH_FAILURES wrong passwords or tokens, until the window moves on (the password is
    then not even tried); a successful login clears the user name's count."""

    request: Any
    data: Any

    retry_after_s: int | None = None

    def clean(self) -> dict[str, Any]:
        username = (self.data.get("username") or "").strip().lower()[:150]
        throttle = FailureThrottle(
            scope="login_failure", setting="CB_THROTTLE_LOGIN_FAILURES", request=self.request, extra=username
        )
        # Per address too, whatever the user name: one guess at many users (password spraying)
        # counts with the address's wrong tokens.
        address = FailureThrottle(
            scope="auth_failure", setting="CB_THROTTLE_AUTH_FAILURES", request=self.request
        )
        blocked = [t for t in (throttle, address) if t.blocked()]
        if blocked:
            wait = max(t.wait() or 1.0 for t in blocked)
            self.retry_after_s = math.ceil(wait)
            raise ValidationError(
                f"Too many failed logins from your address: try again in {math.ceil(wait / 60)} minute(s).",
                code="throttled",
            )
        try:
            cleaned: dict[str, Any] = super().clean()  # type: ignore[misc]
        except ValidationError:
            throttle.record_failure()
            address.record_failure()
            raise
        throttle.reset()
        return cleaned


class ThrottledAuthenticationForm(LoginThrottleMixin, AuthenticationForm):
    """The site's login page."""


class ThrottledAdminAuthenticationForm(LoginThrottleMixin, AdminAuthenticationForm):
    """The admin's own login page (it does not use the site's)."""


class TokenCreateForm(forms.Form):
    name = forms.CharField(max_length=100, required=False, help_text="what the token is for, e.g. ci")
