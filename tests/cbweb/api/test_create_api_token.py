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


def test_running_it_again_prints_the_same_token(db: Any) -> None:
    first, second = StringIO(), StringIO()
    call_command("create_api_token", "ci-bot", stdout=first, stderr=StringIO())
    call_command("create_api_token", "ci-bot", stdout=second, stderr=StringIO())
    assert first.getvalue().splitlines()[-1] == second.getvalue().splitlines()[-1]
