"""Deployment hardening (issue 17, item 5): secret key, passwords, throttles, tokens at rest, the
admin of tokens, HTTPS settings, and a clean ``check --deploy`` with the production example."""

from __future__ import annotations

import hashlib
import os
import secrets
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.password_validation import validate_password
from django.core.exceptions import ValidationError
from rest_framework.test import APIClient

ROOT = Path(__file__).resolve().parents[2]
OLD_DEFAULT_KEY = "consumerbench-insecure-development-key-change-me"


def _manage(tmp_path: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """Run manage.py in a clean environment: only ``env`` and what Python needs."""
    base = {
        "PATH": os.environ.get("PATH", ""),
        "PYTHONPATH": str(ROOT),
        "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "cbweb.settings",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CB_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
    }
    return subprocess.run(
        [sys.executable, "manage.py", *args],
        cwd=ROOT,
        env={**base, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _production_env() -> dict[str, str]:
    env = {}
    for line in (ROOT / ".env.production.example").read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            key, _, value = line.partition("=")
            env[key.strip()] = value.strip()
    return env


# --- secret key ------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", [OLD_DEFAULT_KEY, _production_env()["DJANGO_SECRET_KEY"]])
def test_a_published_secret_key_is_refused_when_debug_is_off(tmp_path: Path, key: str) -> None:
    result = _manage(tmp_path, {"DJANGO_SECRET_KEY": key, "DJANGO_DEBUG": "false"}, "check")
    assert result.returncode != 0
    assert "ImproperlyConfigured" in result.stderr
    assert "DJANGO_SECRET_KEY is a published example value: set it to a long random string" in result.stderr


def test_the_old_default_key_still_serves_a_debug_laptop(tmp_path: Path) -> None:
    result = _manage(tmp_path, {"DJANGO_SECRET_KEY": OLD_DEFAULT_KEY, "DJANGO_DEBUG": "true"}, "check")
    assert result.returncode == 0, result.stderr


def test_without_a_key_a_private_random_one_is_generated_once_and_reused(tmp_path: Path) -> None:
    show = ("shell", "-c", "from django.conf import settings; print(settings.SECRET_KEY)")
    first = _manage(tmp_path, {}, *show)
    second = _manage(tmp_path, {}, *show)
    assert first.returncode == 0 and second.returncode == 0, first.stderr + second.stderr
    key_file = tmp_path / "secret_key"
    key = key_file.read_text().strip()
    # The last line: Django's shell may first say what it imported.
    assert first.stdout.splitlines()[-1] == second.stdout.splitlines()[-1] == key
    assert len(key) >= 50 and key != OLD_DEFAULT_KEY
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600


def test_an_unwritable_key_location_says_what_to_set(tmp_path: Path) -> None:
    result = _manage(tmp_path, {"CB_SECRET_KEY_FILE": str(tmp_path / "missing" / "dir" / "key")}, "check")
    assert result.returncode != 0
    assert "set DJANGO_SECRET_KEY to a long random string" in result.stderr


def test_https_mode_requires_an_explicit_key(tmp_path: Path) -> None:
    result = _manage(tmp_path, {"CB_HTTPS": "true"}, "check")
    assert result.returncode != 0
    assert "CB_HTTPS=true marks a server: set DJANGO_SECRET_KEY" in result.stderr


def test_one_variable_switches_on_secure_cookies_hsts_and_the_ssl_redirect(tmp_path: Path) -> None:
    names = [
        "SESSION_COOKIE_SECURE",
        "CSRF_COOKIE_SECURE",
        "SECURE_SSL_REDIRECT",
        "SECURE_PROXY_SSL_HEADER",
        "SECURE_HSTS_SECONDS",
        "SECURE_HSTS_INCLUDE_SUBDOMAINS",
        "SECURE_HSTS_PRELOAD",
    ]
    code = f"from django.conf import settings; print([getattr(settings, n) for n in {names!r}])"
    key = secrets.token_urlsafe(50)
    on = _manage(tmp_path, {"CB_HTTPS": "true", "DJANGO_SECRET_KEY": key}, "shell", "-c", code)
    off = _manage(tmp_path, {"DJANGO_SECRET_KEY": key}, "shell", "-c", code)
    assert on.returncode == 0 and off.returncode == 0, on.stderr + off.stderr
    assert on.stdout.splitlines()[-1] == str(
        [True, True, True, ("HTTP_X_FORWARDED_PROTO", "https"), 31_536_000, True, True]
    )
    assert off.stdout.splitlines()[-1] == str([False, False, False, None, 0, False, False])


def test_check_deploy_finds_no_issue_with_the_production_example(tmp_path: Path) -> None:
    env = {**_production_env(), "DJANGO_SECRET_KEY": secrets.token_urlsafe(50)}
    result = _manage(tmp_path, env, "check", "--deploy", "--fail-level", "DEBUG")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "System check identified no issues (0 silenced)." in result.stdout


# --- passwords -------------------------------------------------------------------------------------


def test_password_1_is_refused_by_the_validators(db: Any) -> None:
    with pytest.raises(ValidationError):
        validate_password("1")


def test_createsuperuser_without_input_refuses_a_weak_password(tmp_path: Path) -> None:
    assert _manage(tmp_path, {}, "migrate", "--noinput").returncode == 0
    args = ("createsuperuser", "--noinput", "--username", "root", "--email", "root@example.com")
    weak = _manage(tmp_path, {"DJANGO_SUPERUSER_PASSWORD": "1"}, *args)
    assert weak.returncode != 0
    assert "DJANGO_SUPERUSER_PASSWORD is refused" in weak.stderr and "too short" in weak.stderr
    strong = _manage(tmp_path, {"DJANGO_SUPERUSER_PASSWORD": "a-long-lab-passphrase-42"}, *args)
    assert strong.returncode == 0, strong.stderr


def test_the_admin_password_change_form_refuses_1(client: Any, make_user: Any) -> None:
    root = make_user("root", staff=True)
    root.is_superuser = True
    root.save()
    client.force_login(root)
    response = client.post(
        f"/admin/auth/user/{root.pk}/password/",
        {"password1": "1", "password2": "1", "usable_password": "true"},
    )
    assert response.status_code == 200
    assert "This password is too short" in response.content.decode()


# --- throttles -------------------------------------------------------------------------------------


def test_a_burst_of_100_bad_tokens_is_cut_off_with_429_and_retry_after(db: Any, settings: Any) -> None:
    settings.CB_THROTTLE_AUTH_FAILURES = "20/m"
    client = APIClient()
    codes = []
    for i in range(100):
        client.credentials(HTTP_AUTHORIZATION=f"Token wrong-{i:03d}")
        codes.append(client.get("/api/v1/workflows/").status_code)
    assert codes[:20] == [401] * 20
    assert set(codes[20:]) == {429}
    client.credentials(HTTP_AUTHORIZATION="Token wrong-again")
    response = client.get("/api/v1/workflows/")
    assert response.status_code == 429
    assert 1 <= int(response["Retry-After"]) <= 60
    body = response.json()
    assert set(body) == {"message", "errors"} and "throttled" in body["message"].lower()


def test_while_throttled_even_a_valid_token_waits_but_other_clients_do_not(
    alice: Any, make_token: Any, settings: Any
) -> None:
    settings.CB_THROTTLE_AUTH_FAILURES = "5/m"
    key = make_token(alice)
    client = APIClient(REMOTE_ADDR="10.0.0.1")
    client.credentials(HTTP_AUTHORIZATION="Token guess")
    for _ in range(5):
        assert client.get("/api/v1/workflows/").status_code == 401
    client.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert client.get("/api/v1/workflows/").status_code == 429
    other = APIClient(REMOTE_ADDR="10.0.0.2")
    other.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert other.get("/api/v1/workflows/").status_code == 200


def test_a_spoofed_forwarded_for_does_not_reset_the_count(db: Any, settings: Any) -> None:
    settings.CB_THROTTLE_AUTH_FAILURES = "3/m"
    client = APIClient()
    codes = []
    for i in range(6):
        client.credentials(HTTP_AUTHORIZATION="Token nope", HTTP_X_FORWARDED_FOR=f"203.0.113.{i}")
        codes.append(client.get("/api/v1/workflows/").status_code)
    assert codes == [401, 401, 401, 429, 429, 429]


def test_throttle_counts_live_in_redis_when_a_broker_is_set(tmp_path: Path) -> None:
    code = "from django.conf import settings; print(settings.CACHES['default']['BACKEND'])"
    broker = _manage(tmp_path, {"CELERY_BROKER_URL": "redis://127.0.0.1:6379/9"}, "shell", "-c", code)
    alone = _manage(tmp_path, {}, "shell", "-c", code)
    explicit = _manage(tmp_path, {"CACHE_URL": "redis://127.0.0.1:6379/3"}, "shell", "-c", code)
    assert broker.stdout.splitlines()[-1] == "django.core.cache.backends.redis.RedisCache"
    assert explicit.stdout.splitlines()[-1] == "django.core.cache.backends.redis.RedisCache"
    assert alone.stdout.splitlines()[-1] == "django.core.cache.backends.locmem.LocMemCache"


@pytest.mark.broker
def test_two_processes_sharing_redis_share_one_failure_count(db: Any, settings: Any, tmp_path: Path) -> None:
    from tests.conftest import REDIS_URL

    assert _manage(tmp_path, {}, "migrate", "--noinput").returncode == 0

    prefix = f"test-{secrets.token_hex(4)}"
    redis_cache = {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": REDIS_URL}
    settings.CACHES = {"default": {**redis_cache, "KEY_PREFIX": prefix}}
    settings.CB_THROTTLE_AUTH_FAILURES = "4/m"
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token nope")
    assert [client.get("/api/v1/workflows/").status_code for _ in range(2)] == [401, 401]
    # Another web process: its own interpreter, the same Redis.
    code = (
        f"from django.conf import settings; settings.CACHES['default']['KEY_PREFIX'] = {prefix!r}; "
        "from rest_framework.test import APIClient; c = APIClient(); "
        "c.credentials(HTTP_AUTHORIZATION='Token nope'); "
        "print([c.get('/api/v1/workflows/').status_code for _ in range(3)])"
    )
    env = {
        **os.environ,
        "CACHE_URL": REDIS_URL,
        "CB_THROTTLE_AUTH_FAILURES": "4/m",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "CB_SECRET_KEY_FILE": str(tmp_path / "secret_key"),
        "PYTHONPATH": str(ROOT),
        "DJANGO_SETTINGS_MODULE": "cbweb.settings",
    }
    other = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert other.returncode == 0, other.stderr
    assert other.stdout.splitlines()[-1] == "[401, 401, 429]"
    assert client.get("/api/v1/workflows/").status_code == 429


def test_forty_wrong_logins_in_a_row_start_being_refused(client: Any, alice: Any, settings: Any) -> None:
    settings.CB_THROTTLE_LOGIN_FAILURES = "10/h"
    codes = [
        client.post("/accounts/login/", {"username": "alice", "password": f"guess-{i}"}).status_code
        for i in range(40)
    ]
    assert codes[:10] == [200] * 10  # the form again, with "enter a correct username and password"
    assert set(codes[10:]) == {429}
    # Refused without trying the password: the right one is refused too, until the window moves on.
    response = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"})
    assert response.status_code == 429 and int(response["Retry-After"]) > 0
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_login_failures_count_per_user_name_and_a_success_clears_them(
    client: Any, alice: Any, bob: Any, settings: Any
) -> None:
    settings.CB_THROTTLE_LOGIN_FAILURES = "3/h"
    for _ in range(2):
        client.post("/accounts/login/", {"username": "alice", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code == 302
    client.logout()
    for _ in range(3):
        client.post("/accounts/login/", {"username": "ALICE", "password": "wrong"})
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code == 429
    assert client.post("/accounts/login/", {"username": "bob", "password": "pw-bob"}).status_code == 302


def test_the_admin_login_is_throttled_too(client: Any, make_user: Any, settings: Any) -> None:
    settings.CB_THROTTLE_LOGIN_FAILURES = "3/h"
    make_user("root", staff=True)
    for _ in range(3):
        client.post("/admin/login/", {"username": "root", "password": "wrong"})
    response = client.post("/admin/login/", {"username": "root", "password": "pw-root"})
    assert "Too many failed logins" in response.content.decode()
    assert "_auth_user_id" not in client.session


def test_api_writes_are_throttled_per_user_and_reads_are_not(api: Any, settings: Any) -> None:
    settings.CB_THROTTLE_WRITES = "3/m"
    body = {"yaml": "a: {type: Sleep}\n"}
    codes = [api.post("/api/v1/workflows/validate/", body, format="json").status_code for _ in range(5)]
    assert codes == [200, 200, 200, 429, 429]
    response = api.post("/api/v1/workflows/validate/", body, format="json")
    assert "Retry-After" in response and set(response.json()) == {"message", "errors"}
    assert all(api.get("/api/v1/workflows/").status_code == 200 for _ in range(10))


# --- tokens at rest and the admin of tokens ----------------------------------------------------------


@pytest.fixture
def api(alice: Any, make_token: Any) -> Any:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {make_token(alice)}")
    return client


def test_no_table_holds_a_token_key(alice: Any, make_token: Any) -> None:
    from django.db import connection

    key = make_token(alice)
    with connection.cursor() as cursor:
        tables = connection.introspection.table_names(cursor)
        assert "authtoken_token" not in tables
        cursor.execute("SELECT * FROM api_apitoken")
        rows = cursor.fetchall()
    assert rows and not any(key in str(value) for row in rows for value in row)
    assert any(hashlib.sha256(key.encode()).hexdigest() in row for row in rows)


def test_staff_with_the_permission_see_tokens_in_the_admin_but_never_a_key(
    client: Any, alice: Any, make_user: Any, make_token: Any
) -> None:
    from cbweb.api.models import ApiToken

    key = make_token(alice)
    token = ApiToken.objects.get()
    root = make_user("root", staff=True)
    root.is_superuser = True
    root.save()
    client.force_login(root)
    listing = client.get("/admin/api/apitoken/").content.decode()
    page = client.get(f"/admin/api/apitoken/{token.pk}/change/").content.decode()
    assert token.prefix in listing and "alice" in listing
    for html in (listing, page):
        assert key not in html and token.digest not in html
    assert client.get("/admin/api/apitoken/add/").status_code == 403


def test_staff_without_the_permission_and_other_users_see_no_tokens(
    client: Any, alice: Any, make_user: Any, make_token: Any
) -> None:
    make_token(alice)
    client.force_login(make_user("helper", staff=True))
    assert client.get("/admin/api/apitoken/").status_code == 403
    client.force_login(alice)
    response = client.get("/admin/api/apitoken/")
    assert response.status_code == 302 and "/admin/login/" in response["Location"]
    assert client.get("/admin/").status_code == 302


@pytest.mark.django_db(transaction=True)
def test_keys_of_the_old_plain_token_table_are_hashed_and_keep_working(alice: Any) -> None:
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor

    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate([("api", "0001_initial")])
    old_key = "0123456789abcdef0123456789abcdef01234567"
    with connection.cursor() as cursor:
        cursor.execute(
            "CREATE TABLE authtoken_token (key varchar(40) PRIMARY KEY, created timestamp NOT NULL, "
            "user_id integer NOT NULL UNIQUE)"
        )
        cursor.execute(
            "INSERT INTO authtoken_token (key, created, user_id) VALUES (%s, %s, %s)",
            [old_key, "2026-01-02 03:04:05", alice.pk],
        )
    executor = MigrationExecutor(connection)
    executor.migrate([("api", "0002_hash_authtoken_keys")])
    assert "authtoken_token" not in connection.introspection.table_names()
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {old_key}")
    response = client.post("/api/v1/workflows/validate/", {"yaml": "a: {type: Sleep}\n"}, format="json")
    assert response.status_code == 200, response.json()
    # The later migrations back, for the tests that run after this one on the same database.
    MigrationExecutor(connection).migrate(latest)


def test_users_create_a_token_on_their_page_and_see_its_key_only_once(client: Any, alice: Any) -> None:
    import re

    client.force_login(alice)
    created = client.post("/accounts/tokens/", {"action": "create", "name": "laptop"})
    assert created.status_code == 200 and created["Cache-Control"] == "no-store"
    key = re.search(r'id="new-token">.*?<code>([^<]+)</code>', created.content.decode(), re.S).group(1)
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {key}")
    assert (
        api.post("/api/v1/workflows/validate/", {"yaml": "a: {type: Sleep}\n"}, format="json").status_code
        == 200
    )
    later = client.get("/accounts/tokens/").content.decode()
    assert key not in later and key[:6] in later and "laptop" in later


def test_users_revoke_their_own_tokens_only(client: Any, alice: Any, bob: Any, make_token: Any) -> None:
    from cbweb.api.models import ApiToken

    alice_key, bob_key = make_token(alice), make_token(bob)
    alice_token, bob_token = ApiToken.objects.get(user=alice), ApiToken.objects.get(user=bob)
    client.force_login(alice)
    assert client.post("/accounts/tokens/", {"action": "revoke", "token": bob_token.pk}).status_code == 404
    assert client.post("/accounts/tokens/", {"action": "revoke", "token": alice_token.pk}).status_code == 200
    assert list(ApiToken.objects.all()) == [bob_token]
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {alice_key}")
    assert api.get("/api/v1/workflows/").status_code == 401
    api.credentials(HTTP_AUTHORIZATION=f"Token {bob_key}")
    assert api.get("/api/v1/workflows/").status_code == 200
    client.logout()
    assert client.get("/accounts/tokens/").status_code == 302


def test_one_guess_at_many_user_names_is_throttled_per_address(
    client: Any, alice: Any, settings: Any
) -> None:
    settings.CB_THROTTLE_LOGIN_FAILURES = "10/h"
    settings.CB_THROTTLE_AUTH_FAILURES = "20/m"
    codes = [
        client.post("/accounts/login/", {"username": f"user{i}", "password": "Summer2026!"}).status_code
        for i in range(30)
    ]
    assert codes[:20] == [200] * 20 and set(codes[20:]) == {429}
    # Wrong tokens and wrong passwords from one address share that count.
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION="Token nope")
    assert api.get("/api/v1/workflows/").status_code == 429


def test_an_unreachable_throttle_cache_lets_requests_through(
    client: Any, alice: Any, make_token: Any, settings: Any, caplog: Any
) -> None:
    # Port 1 refuses at once: Redis restarting must not turn signed-in requests into server errors.
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": "redis://127.0.0.1:1/0",
        }
    }
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {make_token(alice)}")
    assert (
        api.post("/api/v1/workflows/validate/", {"yaml": "a: {type: Sleep}\n"}, format="json").status_code
        == 200
    )
    api.credentials(HTTP_AUTHORIZATION="Token nope")
    assert api.get("/api/v1/workflows/").status_code == 401
    assert client.post("/accounts/login/", {"username": "alice", "password": "pw-alice"}).status_code == 302
    assert "throttle cache unavailable" in caplog.text
