"""Django settings: every value comes from an environment variable (12-factor), listed in .env.example.

Zero-setup defaults: SQLite next to the checkout, no broker (runs execute on a local background
thread of the web process), reading open to everyone. Setting ``DATABASE_URL`` and
``CELERY_BROKER_URL`` switches to PostgreSQL and Redis with no code change.
"""

from __future__ import annotations

from pathlib import Path

import environ
from csp import constants as csp_constants

from benchmarks.files import default_data_dirs, default_model_dirs
from benchmarks.models.resolver import model_dirs

BASE_DIR = Path(__file__).resolve().parent.parent

env = environ.Env()
# A .env file is read when present (developer convenience); real deployments set the environment.
environ.Env.read_env(BASE_DIR / ".env", overwrite=False)


def _strict_bool(name: str, default: bool) -> bool:
    """Parse a boolean variable strictly: a typo such as DEBUG=ture is an error, not False."""
    raw = env.str(name, default="")
    if raw == "":
        return default
    value = raw.strip().lower()
    if value in ("1", "true", "yes", "on"):
        return True
    if value in ("0", "false", "no", "off"):
        return False
    raise environ.ImproperlyConfigured(
        f"{name}={raw!r} is not a boolean (use true/false, 1/0, yes/no, on/off)"
    )


# --------------------------------------------------------------------------------------------------
# Core
# --------------------------------------------------------------------------------------------------

DEBUG = _strict_bool("DJANGO_DEBUG", False)
# SECRET_KEY: see "Deployment hardening" below (never a public default).
ALLOWED_HOSTS = env.list("DJANGO_ALLOWED_HOSTS", default=["localhost", "127.0.0.1", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env.list("DJANGO_CSRF_TRUSTED_ORIGINS", default=[])

INSTALLED_APPS = [
    # First: its createsuperuser (which checks DJANGO_SUPERUSER_PASSWORD too) replaces Django's.
    "cbweb.api",
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "drf_spectacular",
    # Swagger UI and Redoc as static files of this server (no CDN): /api/v1/docs/, /api/v1/redoc/.
    "drf_spectacular_sidecar",
    "cbweb.platforms",
    "cbweb.workflows",
    "cbweb.runs",
    "cbweb.leaderboard",
]

MIDDLEWARE = [
    # First: a body over CB_MAX_REQUEST_BYTES is refused before the CSRF check reads it, a path over
    # CB_MAX_PATH_CHARS before a URL pattern is tried on it.
    "cbweb.middleware.RequestSizeLimitMiddleware",
    # A statement cancelled by CB_DB_STATEMENT_TIMEOUT_MS: 503 with Retry-After, not a server error.
    "cbweb.middleware.StatementTimeoutMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
]

ROOT_URLCONF = "cbweb.urls"
WSGI_APPLICATION = "cbweb.wsgi.application"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
            ],
        },
    },
]

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

# --------------------------------------------------------------------------------------------------
# Database
# --------------------------------------------------------------------------------------------------

DATABASES = {"default": env.db_url("DATABASE_URL", default=f"sqlite:///{BASE_DIR / 'db.sqlite3'}")}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # The run executor writes from its own thread while pages read: take the write lock at BEGIN
    # and wait for it instead of failing with "database is locked".
    DATABASES["default"].setdefault("OPTIONS", {}).update({"transaction_mode": "IMMEDIATE", "timeout": 30})
DATABASES["default"]["ATOMIC_REQUESTS"] = False
DATABASES["default"].setdefault("CONN_MAX_AGE", env.int("DATABASE_CONN_MAX_AGE", default=0))
# PostgreSQL ends any statement that runs longer than this (milliseconds; 0: no limit), so that no
# request can hold a connection and a core for long. docker-compose.yml gives the web server and the
# sweeper 10 s and the workers, which store whole results, 5 minutes (docs/operations.md).
CB_DB_STATEMENT_TIMEOUT_MS = env.int("CB_DB_STATEMENT_TIMEOUT_MS", default=0)
if CB_DB_STATEMENT_TIMEOUT_MS < 0:
    raise environ.ImproperlyConfigured(
        f"CB_DB_STATEMENT_TIMEOUT_MS={CB_DB_STATEMENT_TIMEOUT_MS} must be 0 (no limit) or milliseconds"
    )
if CB_DB_STATEMENT_TIMEOUT_MS and DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    # A libpq start-up option: set once per connection, no query per request.
    _options = DATABASES["default"].setdefault("OPTIONS", {})
    _options["options"] = (
        f"{_options.get('options', '')} -c statement_timeout={CB_DB_STATEMENT_TIMEOUT_MS}".strip()
    )

# --------------------------------------------------------------------------------------------------
# Static files and run bundles
# --------------------------------------------------------------------------------------------------

STATIC_URL = "static/"
STATIC_ROOT = Path(env.str("DJANGO_STATIC_ROOT", default=str(BASE_DIR / "staticfiles")))
# Chart.js comes from node_modules (installed from the npm registry by `make install`), never a CDN.
STATICFILES_DIRS = [BASE_DIR / "static", ("vendor/chart.js", BASE_DIR / "node_modules" / "chart.js" / "dist")]
# gunicorn does not serve static files: a deployment without a front web server (docker-compose.yml)
# sets CB_SERVE_STATIC=true and WhiteNoise serves the collected STATIC_ROOT from the web process.
CB_SERVE_STATIC = _strict_bool("CB_SERVE_STATIC", False)
if CB_SERVE_STATIC:
    MIDDLEWARE.insert(MIDDLEWARE.index("django.middleware.security.SecurityMiddleware") + 1,
                      "whitenoise.middleware.WhiteNoiseMiddleware")  # fmt: skip
# Result bundles (result.json, CSVs, images) written by the run executor, one folder per run.
CB_RESULTS_DIR = Path(env.str("CB_RESULTS_DIR", default=str(BASE_DIR / "results" / "web")))

# --------------------------------------------------------------------------------------------------
# File access policy (benchmarks/files.py; docs/security.md#file-access-policy)
# --------------------------------------------------------------------------------------------------

# A workflow submitted here is untrusted: every file it names (model, prompts, audio, reference,
# trace, documents, dataset) must lie under one of these folders, checked when it is saved, when a
# run is launched and again by the worker. CB_DATA_DIRS is comma-separated; CB_MODEL_DIRS is also the
# engine's model search path, read by the engine's own rule (commas or os.pathsep). The defaults are the
# packaged data folder, the packaged models' folders and the engine's model cache (CB_CACHE_DIR). An
# empty value means the default (an empty entry must never become the working directory).
CB_DATA_DIRS = [
    Path(p.strip()) for p in env.list("CB_DATA_DIRS", default=[]) if p.strip()
] or default_data_dirs()
CB_MODEL_DIRS = (
    list(model_dirs({"CB_MODEL_DIRS": env.str("CB_MODEL_DIRS", default="")})) or default_model_dirs()
)

# --------------------------------------------------------------------------------------------------
# Authentication and access
# --------------------------------------------------------------------------------------------------

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "workflows:list"
LOGOUT_REDIRECT_URL = "workflows:list"
# Reading pages and the API open to anonymous visitors (a lab intranet) or login-only.
CB_READ_REQUIRES_LOGIN = _strict_bool("CB_READ_REQUIRES_LOGIN", False)

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "cbweb.api.authentication.HashedTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": ["cbweb.api.permissions.ReadOpenWriteAuthenticated"],
    "DEFAULT_SCHEMA_CLASS": "cbweb.api.schema.ApiSchema",
    "DEFAULT_PAGINATION_CLASS": "cbweb.api.pagination.StrictLimitOffsetPagination",
    "PAGE_SIZE": 50,
    "EXCEPTION_HANDLER": "cbweb.api.errors.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON bodies are checked against CB_MAX_SPEC_BYTES and CB_MAX_SPEC_DEPTH before they are parsed.
    "DEFAULT_PARSER_CLASSES": ["cbweb.api.parsers.BoundedJSONParser"],
    # Rates: "Deployment hardening" below (CB_THROTTLE_*); the classes read them from there.
    "DEFAULT_THROTTLE_CLASSES": [
        "cbweb.api.throttles.WriteThrottle",
        "cbweb.api.throttles.AnonymousReadThrottle",
    ],
}

SPECTACULAR_SETTINGS = {
    "TITLE": "ConsumerBench API",
    "DESCRIPTION": "Workflows, runs, results, telemetry, platforms. Send 'Authorization: Token <key>'.",
    "VERSION": "1",
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --------------------------------------------------------------------------------------------------
# Input limits (docs/security.md#input-limits): a workflow beyond one is refused with a 400 naming it
# --------------------------------------------------------------------------------------------------

# Workflow text or JSON body, in bytes (the API refuses a larger request body before parsing it).
CB_MAX_SPEC_BYTES = env.int("CB_MAX_SPEC_BYTES", default=1024 * 1024)
# A whole request body, in bytes, refused (413) before anything reads it: room for a workflow as text
# and as an uploaded file in one editor form. Uploads up to it stay in memory, never in temp files.
CB_MAX_REQUEST_BYTES = env.int("CB_MAX_REQUEST_BYTES", default=2 * CB_MAX_SPEC_BYTES + 256 * 1024)
DATA_UPLOAD_MAX_MEMORY_SIZE = CB_MAX_REQUEST_BYTES
FILE_UPLOAD_MAX_MEMORY_SIZE = CB_MAX_REQUEST_BYTES
# A URL path, in characters (414 over it): the longest page path (a run's bundle file) is far shorter.
CB_MAX_PATH_CHARS = env.int("CB_MAX_PATH_CHARS", default=512)
# Nesting of YAML, of a JSON request body and of a spec mapping.
CB_MAX_SPEC_DEPTH = env.int("CB_MAX_SPEC_DEPTH", default=64)
# Application units and DAG nodes per workflow (each node is one OS process when it runs).
CB_MAX_UNITS = env.int("CB_MAX_UNITS", default=64)
CB_MAX_NODES = env.int("CB_MAX_NODES", default=64)
# Requests one run issues: sum over nodes of (warmup_requests + num_requests) x concurrency.
CB_MAX_TOTAL_REQUESTS = env.int("CB_MAX_TOTAL_REQUESTS", default=100_000)
for _name, _value in (
    ("CB_MAX_SPEC_BYTES", CB_MAX_SPEC_BYTES),
    ("CB_MAX_REQUEST_BYTES", CB_MAX_REQUEST_BYTES),
    ("CB_MAX_PATH_CHARS", CB_MAX_PATH_CHARS),
    ("CB_MAX_SPEC_DEPTH", CB_MAX_SPEC_DEPTH),
    ("CB_MAX_UNITS", CB_MAX_UNITS),
    ("CB_MAX_NODES", CB_MAX_NODES),
    ("CB_MAX_TOTAL_REQUESTS", CB_MAX_TOTAL_REQUESTS),
):
    if _value < 1:
        raise environ.ImproperlyConfigured(f"{_name}={_value} must be at least 1")

# --------------------------------------------------------------------------------------------------
# Run execution (Celery)
# --------------------------------------------------------------------------------------------------

CELERY_BROKER_URL = env.str("CELERY_BROKER_URL", default="")
CELERY_RESULT_BACKEND = env.str("CELERY_RESULT_BACKEND", default="") or None
# No broker: Celery calls execute in-process. Only tests rely on that; the web app uses the local
# executor below so that a request never waits for a run.
CELERY_TASK_ALWAYS_EAGER = not CELERY_BROKER_URL
CELERY_TASK_EAGER_PROPAGATES = True
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_TASK_SERIALIZER = "json"
CELERY_RESULT_SERIALIZER = "json"
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
# "celery": send runs to the broker; "local": run them on a background thread of this process.
CB_RUN_EXECUTOR = env.str("CB_RUN_EXECUTOR", default="celery" if CELERY_BROKER_URL else "local")
if CB_RUN_EXECUTOR not in ("celery", "local"):
    raise environ.ImproperlyConfigured(f"CB_RUN_EXECUTOR={CB_RUN_EXECUTOR!r}: use 'celery' or 'local'")
# With the "celery" executor, the web side hands a run over through this one callable,
# send(run_id=..., queue=...), named by dotted path because cbweb imports no worker module
# (cbweb/runs/dispatch.py says why). Not an environment variable: no deployment needs another.
CB_RUN_SENDER = "workers.tasks.run_send"
# Runs one user may have queued at once (page and API alike): a launch beyond it is refused, saying
# how many are queued. Queued runs start in turns across users (docs/operations.md, the fair queue).
CB_MAX_QUEUED_RUNS_PER_USER = env.int("CB_MAX_QUEUED_RUNS_PER_USER", default=20)
if CB_MAX_QUEUED_RUNS_PER_USER < 1:
    raise environ.ImproperlyConfigured(
        f"CB_MAX_QUEUED_RUNS_PER_USER={CB_MAX_QUEUED_RUNS_PER_USER} must be >= 1"
    )
# Time limits of one run (cbweb/runs/limits.py): the soft limit, after which the engine stops the run
# gracefully and marks it failed, is a per-node allowance (model load) plus a per-request allowance,
# capped at CB_RUN_TIME_LIMIT_S; the hard limit, after which the worker kills what the engine
# started, is the soft one plus CB_RUN_HARD_LIMIT_GRACE_S.
CB_RUN_TIME_LIMIT_S = env.float("CB_RUN_TIME_LIMIT_S", default=4 * 3600.0)
CB_RUN_TIME_PER_NODE_S = env.float("CB_RUN_TIME_PER_NODE_S", default=600.0)
CB_RUN_TIME_PER_REQUEST_S = env.float("CB_RUN_TIME_PER_REQUEST_S", default=120.0)
CB_RUN_HARD_LIMIT_GRACE_S = env.float("CB_RUN_HARD_LIMIT_GRACE_S", default=120.0)
# Heartbeats: a worker refreshes its platform's last_seen_at (and runs the reaper) every
# CB_HEARTBEAT_S; a running run's heartbeat_at is refreshed at least that often too. A worker or a
# run not heard from for CB_WORKER_LOST_AFTER_S is lost: its platform is no longer offered and the
# reaper marks its run failed (worker lost), keeping the data already written.
CB_HEARTBEAT_S = env.float("CB_HEARTBEAT_S", default=10.0)
CB_WORKER_LOST_AFTER_S = env.float("CB_WORKER_LOST_AFTER_S", default=60.0)
if CB_WORKER_LOST_AFTER_S < 3 * CB_HEARTBEAT_S:
    raise environ.ImproperlyConfigured(
        f"CB_WORKER_LOST_AFTER_S={CB_WORKER_LOST_AFTER_S:g} must be at least 3 x CB_HEARTBEAT_S "
        f"({CB_HEARTBEAT_S:g}): one late heartbeat must not fail a healthy run"
    )

# --------------------------------------------------------------------------------------------------
# Reliability: runs are never lost (docs/operations.md)
# --------------------------------------------------------------------------------------------------

# The sweeper (`manage.py sweep_runs`, the docker-compose `sweeper` service; the local executor's
# thread without a broker) repairs runs every CB_SWEEP_S: a queued run never handed to the broker (the
# broker was down at submit) is sent at the next sweep, one sent more than CB_REDISPATCH_AFTER_S ago
# (doubling with each re-send of the same run, up to 16x) is sent again (the broker may have lost it;
# a duplicate finds the run claimed and does nothing), and
# a running run whose heartbeat is older than CB_WORKER_LOST_AFTER_S is failed (worker lost).
CB_SWEEP_S = env.float("CB_SWEEP_S", default=10.0)
CB_REDISPATCH_AFTER_S = env.float("CB_REDISPATCH_AFTER_S", default=120.0)
# How long a worker keeps retrying a database write it cannot lose (the final result, a failure)
# while PostgreSQL restarts; progress and telemetry writes are retried with the run's next flush.
CB_DB_RETRY_S = env.float("CB_DB_RETRY_S", default=300.0)
if CB_SWEEP_S <= 0 or CB_REDISPATCH_AFTER_S < CB_SWEEP_S:
    raise environ.ImproperlyConfigured(
        f"CB_SWEEP_S={CB_SWEEP_S:g} must be positive and CB_REDISPATCH_AFTER_S={CB_REDISPATCH_AFTER_S:g} "
        "at least as long: a run is re-sent at most once per sweep"
    )
# A database outage shorter than a sweep goes unnoticed by the sweeper, so it must not be able to age
# a healthy run's heartbeat past the lost-after limit (docs/operations.md, "Clocks").
if CB_SWEEP_S > CB_WORKER_LOST_AFTER_S - CB_HEARTBEAT_S:
    raise environ.ImproperlyConfigured(
        f"CB_SWEEP_S={CB_SWEEP_S:g} must be at most CB_WORKER_LOST_AFTER_S - CB_HEARTBEAT_S "
        f"({CB_WORKER_LOST_AFTER_S - CB_HEARTBEAT_S:g}): the sweeper must see every outage that could "
        "make a healthy run look lost"
    )
# Redis hands an unacknowledged message to another worker after its visibility timeout. A run's
# message is acknowledged when the run ends (acks late), so the timeout must outlast the longest run,
# or a second worker would receive it mid-run (it would find the run claimed and do nothing, but the
# message would be delivered again and again). Lost messages are the sweeper's job, not Redis's.
CELERY_BROKER_TRANSPORT_OPTIONS = {
    "visibility_timeout": int(CB_RUN_TIME_LIMIT_S + CB_RUN_HARD_LIMIT_GRACE_S + 3600),
}
# A worker whose broker restarts reconnects forever (a run in progress goes on meanwhile); the web
# process gives up publishing after about a second: the run stays queued and the sweeper sends it.
CELERY_BROKER_CONNECTION_RETRY = True
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
CELERY_BROKER_CONNECTION_MAX_RETRIES = None
CELERY_BROKER_CONNECTION_TIMEOUT = 2.0
CELERY_TASK_PUBLISH_RETRY = True
CELERY_TASK_PUBLISH_RETRY_POLICY = {
    "max_retries": 2,
    "interval_start": 0,
    "interval_step": 0.5,
    "interval_max": 0.5,
}
# A worker lost mid-task leaves its message unacknowledged, to be redelivered (acks late); a task that
# met a database error before its claim is retried with backoff (workers/tasks.py).
CELERY_TASK_REJECT_ON_WORKER_LOST = True
# The run in progress goes on when the broker connection drops; its message's later redelivery finds
# the run claimed and does nothing.
CELERY_WORKER_CANCEL_LONG_RUNNING_TASKS_ON_CONNECTION_LOSS = False

# --------------------------------------------------------------------------------------------------
# Deployment hardening (docs/security.md): secret key, passwords, cache, throttles, HTTPS
# --------------------------------------------------------------------------------------------------

# Keys that were ever public (the old built-in default, the placeholder of .env.production.example):
# a server holding one would sign sessions anyone can forge.
PUBLIC_SECRET_KEYS = frozenset(
    {
        "consumerbench-insecure-development-key-change-me",
        "replace-with-a-long-random-string-from-secrets.token_urlsafe",
    }
)
# Zero-setup mode (make web / make demo / the tests) has no DJANGO_SECRET_KEY: the first start
# creates a random key in this git-ignored file, readable by its owner only, and later starts reuse
# it, so no public key ever signs a session. Servers set DJANGO_SECRET_KEY, one key for every process.
CB_SECRET_KEY_FILE = Path(env.str("CB_SECRET_KEY_FILE", default=str(BASE_DIR / ".secret_key")))


def _local_secret_key(path: Path) -> str:
    import os
    import secrets

    if not path.exists():
        # Written aside, then linked into place: when several processes start at once, one link
        # wins and every process reads the same complete key.
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="ascii") as out:
                out.write(secrets.token_urlsafe(50) + "\n")
            os.link(tmp, path)
        except FileExistsError:
            pass
        except OSError as exc:
            raise environ.ImproperlyConfigured(
                f"no DJANGO_SECRET_KEY is set and no local key could be created in {path} "
                f"({exc.strerror}): set DJANGO_SECRET_KEY to a long random string "
                '(python -c "import secrets; print(secrets.token_urlsafe(50))")'
            ) from None
        finally:
            tmp.unlink(missing_ok=True)
    key = path.read_text(encoding="ascii").strip()
    if len(key) < 50:
        raise environ.ImproperlyConfigured(
            f"{path} does not hold a secret key (empty or shorter than 50 characters): delete it to "
            "get a new one, or set DJANGO_SECRET_KEY"
        )
    return key


SECRET_KEY = env.str("DJANGO_SECRET_KEY", default="") or _local_secret_key(CB_SECRET_KEY_FILE)
if SECRET_KEY in PUBLIC_SECRET_KEYS and not DEBUG:
    raise environ.ImproperlyConfigured(
        "DJANGO_SECRET_KEY is a published example value: set it to a long random string "
        '(python -c "import secrets; print(secrets.token_urlsafe(50))"), the same for every web process, '
        "or unset it on a laptop to use a generated local key"
    )

# Django's four validators: forms, the admin and createsuperuser refuse "1" and its friends.
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

# Throttle counters must be shared by every web process: Redis when CACHE_URL or a Redis broker is
# set, else (one process: runserver, tests) this process's memory.
_redis_broker = CELERY_BROKER_URL if CELERY_BROKER_URL.startswith(("redis://", "rediss://")) else ""
if env.str("CACHE_URL", default=""):
    CACHES = {"default": env.cache_url("CACHE_URL")}
elif _redis_broker:
    CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": _redis_broker,
            "KEY_PREFIX": "cbweb",
        }
    }
else:
    CACHES = {"default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"}}

# Rates as N/s, N/m, N/h or N/d (docs/security.md). Auth failures: wrong API tokens and wrong
# passwords per client address; login failures: wrong passwords per user name and client address;
# writes: POST/PUT/PATCH/DELETE per user, the API's and the pages' in one budget; previews: the
# editor's live check per user. Over the rate: 429 with Retry-After.
CB_THROTTLE_AUTH_FAILURES = env.str("CB_THROTTLE_AUTH_FAILURES", default="20/m")
CB_THROTTLE_LOGIN_FAILURES = env.str("CB_THROTTLE_LOGIN_FAILURES", default="10/h")
CB_THROTTLE_WRITES = env.str("CB_THROTTLE_WRITES", default="300/h")
CB_THROTTLE_PREVIEWS = env.str("CB_THROTTLE_PREVIEWS", default="120/m")
# Reads (every page, and the API's GETs) by clients not signed in, per client address; empty: not
# throttled. Signed-in readers are not throttled.
CB_THROTTLE_ANON_READS = env.str("CB_THROTTLE_ANON_READS", default="600/m")
# Reverse proxies in front of the web processes: the client address is taken from
# X-Forwarded-For that many hops back; 0 (default) trusts REMOTE_ADDR only, so a client cannot
# dodge the throttles by sending its own X-Forwarded-For.
REST_FRAMEWORK["NUM_PROXIES"] = env.int("CB_NUM_PROXIES", default=0)

# One switch for a server behind HTTPS: secure cookies, HTTP -> HTTPS redirects, HSTS, and trust in
# the proxy's X-Forwarded-Proto (set it only behind a proxy that sets that header itself).
CB_HTTPS = _strict_bool("CB_HTTPS", False)
if CB_HTTPS:
    if not env.str("DJANGO_SECRET_KEY", default=""):
        raise environ.ImproperlyConfigured(
            "CB_HTTPS=true marks a server: set DJANGO_SECRET_KEY (one key shared by every web process) "
            "instead of relying on a key generated in the checkout"
        )
    SESSION_COOKIE_SECURE = True
    CSRF_COOKIE_SECURE = True
    SECURE_SSL_REDIRECT = True
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
    # A year, subdomains included, as browsers' preload lists expect; lower it for a first roll-out.
    SECURE_HSTS_SECONDS = env.int("CB_HSTS_SECONDS", default=31_536_000)
    SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_SECONDS > 0
    SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0

# --------------------------------------------------------------------------------------------------
# Idempotent API writes (docs/api.md): how long a response is kept for retries with its key
# --------------------------------------------------------------------------------------------------

CB_IDEMPOTENCY_HOURS = env.int("CB_IDEMPOTENCY_HOURS", default=24)
if CB_IDEMPOTENCY_HOURS < 1:
    raise environ.ImproperlyConfigured(f"CB_IDEMPOTENCY_HOURS={CB_IDEMPOTENCY_HOURS} must be at least 1")

# --------------------------------------------------------------------------------------------------
# Content-Security-Policy (docs/security.md): pages load scripts, styles and images from this server
# only, and run no inline script or handler; the API's docs pages send their own (cbweb/api/docs.py)
# --------------------------------------------------------------------------------------------------

MIDDLEWARE = [*MIDDLEWARE, "csp.middleware.CSPMiddleware"]
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": [csp_constants.SELF],
        "object-src": [csp_constants.NONE],
        "base-uri": [csp_constants.SELF],
        "form-action": [csp_constants.SELF],
        "frame-ancestors": [csp_constants.NONE],
    }
}

# --------------------------------------------------------------------------------------------------
# Logging
# --------------------------------------------------------------------------------------------------

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "handlers": {"console": {"class": "logging.StreamHandler"}},
    "root": {"handlers": ["console"], "level": env.str("DJANGO_LOG_LEVEL", default="INFO")},
}
