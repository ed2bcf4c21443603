from __future__ import annotations

from io import StringIO
from typing import Any

from django.contrib.auth import get_user_model
from django.core.management import call_command
from rest_framework.test import APIClient


def test_creates_the_user_and_prints_the_token_on_the_last_line(db: Any) -> None:
    out = StringIO()
    call_command("create_api_token", "ci-bot", stdout=out, stderr=StringIO())
    token = out.getvalue().strip().splitlines()[-1]
    assert get_user_model().objects.filter(username="ci-bot").exists()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {token}")
    response = client.post("/api/v1/workflows/validate/", {"yaml": "a: {type: Sleep}\n"}, format="json")
    assert response.status_code == 200


def test_each_call_prints_a_new_token_and_earlier_ones_keep_working(db: Any) -> None:
    first, second = StringIO(), StringIO()
    call_command("create_api_token", "ci-bot", stdout=first, stderr=StringIO())
    call_command("create_api_token", "ci-bot", "--name", "laptop", stdout=second, stderr=StringIO())
    keys = [first.getvalue().splitlines()[-1], second.getvalue().splitlines()[-1]]
    assert keys[0] != keys[1]
    for key in keys:
        client = APIClient()
        client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
        assert (
            client.post(
                "/api/v1/workflows/validate/", {"yaml": "a: {type: Sleep}\n"}, format="json"
            ).status_code
            == 200
        )


def test_the_key_is_stored_only_as_its_sha256(db: Any) -> None:
    import hashlib

    from cbweb.api.models import ApiToken

    out = StringIO()
    call_command("create_api_token", "ci-bot", stdout=out, stderr=StringIO())
    key = out.getvalue().splitlines()[-1]
    token = ApiToken.objects.get()
    assert token.digest == hashlib.sha256(key.encode()).hexdigest()
    assert key.startswith(token.prefix) and len(token.prefix) < len(key) // 4
    stored = [
        str(v)
        for v in ApiToken.objects.values_list(*[f.attname for f in ApiToken._meta.concrete_fields]).get()
    ]
    assert not any(key in value for value in stored)


def test_a_key_never_starts_with_a_dash_so_that_it_passes_as_a_command_line_value() -> None:
    from cbweb.api.models import token_new_key

    # One in 64 urlsafe keys started with "-", which `consumerbench submit --token KEY` read as an option.
    keys = [token_new_key() for _ in range(3000)]
    assert not [k for k in keys if k.startswith("-")]
    assert len(set(keys)) == 3000 and {len(k) for k in keys} == {43}
