"""Tool Console settings: everything that varies between installs comes from env vars."""

import contextlib
import json
import os
import secrets
import zoneinfo
from datetime import timedelta
from pathlib import Path

import dj_database_url
from csp.constants import NONCE as CSP_NONCE
from django.core.exceptions import ImproperlyConfigured


def envbool(name: str, default: str) -> bool:
    return os.getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


def envcpus(name: str, default: str) -> float:
    """A CPU count for a cgroup's cpu.max: a positive number such as 0.5, 1 or 2."""
    raw = os.getenv(name, default).strip()
    try:
        value = float(raw)
    except ValueError:
        value = float("nan")
    # 0.01 CPU is the kernel's smallest quota (1 ms per 100 ms period); nan and inf fail too.
    if not 0.01 <= value <= 4096:
        raise ImproperlyConfigured(
            f"{name} must be a number of CPUs from 0.01 to 4096 (e.g. 0.5, 1 or 2), not {raw!r}"
        )
    return value


def envlist(name: str, default: str) -> list[str]:
    return [item.strip() for item in os.getenv(name, default).split(",") if item.strip()]


def envpath(name: str, default: Path) -> Path:
    value = os.getenv(name)
    return Path(value).expanduser().resolve() if value else default


BASE_DIR = Path(__file__).resolve().parent.parent

# STATE_DIR holds what only the console may read: the SQLite database, the development
# encryption key, the embedded broker's queue and run artifacts. DATA_PATH holds what agents
# read (DATA_PATH/tools). They are separate so that mounting DATA_PATH into an agent
# container never exposes the database or the keys.
STATE_DIR = envpath("CONSOLE_STATE_DIR", BASE_DIR / "var")
DATA_PATH = envpath("DATA_PATH", BASE_DIR / "var" / "data")
SEED_PATH = envpath("CONSOLE_SEED_PATH", BASE_DIR / "seed")
ARTIFACTS_PATH = STATE_DIR / "artifacts"
RUNS_WORK_PATH = STATE_DIR / "runs"


def _secret_key() -> str:
    """CONSOLE_SECRET_KEY, else a generated key kept in STATE_DIR (development only)."""
    if key := os.getenv("CONSOLE_SECRET_KEY"):
        return key
    path = STATE_DIR / "secret_key"
    try:
        return path.read_text().strip()
    except FileNotFoundError:
        STATE_DIR.mkdir(parents=True, exist_ok=True)
        key = secrets.token_urlsafe(50)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(key)
        return key


SECRET_KEY = _secret_key()
DEBUG = envbool("CONSOLE_DEBUG", "False")
ALLOWED_HOSTS = envlist("CONSOLE_ALLOWED_HOSTS", "127.0.0.1,localhost")
CSRF_TRUSTED_ORIGINS = envlist("CONSOLE_CSRF_TRUSTED_ORIGINS", "")

INSTALLED_APPS = [
    "django.contrib.admin",
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django_htmx",
    "template_partials",
    "ninja",
    "tools_app",
]

MIDDLEWARE = [
    # First: the request id covers every later log line, the latency the whole response.
    "tools_app.middleware.RequestContextMiddleware",
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "tools_app.middleware.DatabaseDownMiddleware",
]

ROOT_URLCONF = "console.urls"
WSGI_APPLICATION = "console.wsgi.application"

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
                "tools_app.context_processors.console",
            ],
        },
    },
]

DATABASES = {
    "default": dj_database_url.parse(
        os.getenv("DATABASE_URL", f"sqlite:///{STATE_DIR / 'console.sqlite3'}"),
        # Persistent connections, checked before reuse: opening one (SQLite's PRAGMAs, a
        # PostgreSQL handshake) costs milliseconds on every request and every run.
        conn_max_age=envint("CONSOLE_DB_CONN_MAX_AGE", "60"),
        conn_health_checks=True,
    )
}
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # WAL lets the web server read while a worker writes run progress.
    DATABASES["default"]["OPTIONS"] = {
        "init_command": "PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL;",
        "transaction_mode": "IMMEDIATE",
        "timeout": 20,
    }
    if test_name := os.getenv("CONSOLE_TEST_DB_NAME"):
        # A file (not :memory:) so that a real Celery worker process sees the test data.
        DATABASES["default"]["TEST"] = {"NAME": test_name}

CACHES = {
    # Django's default: each process's memory (agent API bodies, version payloads).
    "default": {"BACKEND": "django.core.cache.backends.locmem.LocMemCache"},
    # What a process remembers for itself alone, whatever "default" is: the agent API's
    # revision for CONSOLE_REGISTRY_REVISION_TTL, parsed manifests of versions.
    "local": {
        "BACKEND": "django.core.cache.backends.locmem.LocMemCache",
        "LOCATION": "console-local",
        "OPTIONS": {"MAX_ENTRIES": 1024},
    },
}

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "index"  # the home page: first steps and status
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"


def _time_zone() -> str:
    """CONSOLE_TIME_ZONE: the zone every page shows times in (each time names it)."""
    name = os.getenv("CONSOLE_TIME_ZONE", "UTC").strip() or "UTC"
    try:
        zoneinfo.ZoneInfo(name)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        raise ImproperlyConfigured(
            f"CONSOLE_TIME_ZONE={name!r} is not a time zone; use a name such as UTC or "
            "Europe/Paris (IANA tz database)"
        ) from None
    return name


TIME_ZONE = _time_zone()

# The address people and agents reach this console at (https://tools.example.org): the
# docs and the MCP setup show it, and http tools may never call its port.
PUBLIC_URL = os.getenv("CONSOLE_PUBLIC_URL", "").strip().rstrip("/")
USE_I18N = True
USE_TZ = True
# ISO dates and 24-hour times wherever no explicit format is given (Django admin too).
FORMAT_MODULE_PATH = ["console.formats"]

STATIC_URL = "static/"
STATIC_ROOT = STATE_DIR / "static"
STATIC_ROOT.mkdir(parents=True, exist_ok=True)  # whitenoise warns on every start otherwise
STATICFILES_DIRS = [BASE_DIR / "static"]
STORAGES = {
    "default": {"BACKEND": "django.core.files.storage.FileSystemStorage"},
    "staticfiles": {"BACKEND": "whitenoise.storage.CompressedStaticFilesStorage"},
}
# Finders are for development; a deploy runs collectstatic (dev.py up does).
WHITENOISE_USE_FINDERS = DEBUG

# --- Production: HTTPS and where run artifacts live -------------------------------------
# HTTPS defaults follow CONSOLE_HTTPS, which is on when CONSOLE_SECRET_KEY is set (a
# production install must set it) and off for a development install with its generated
# key, served over plain HTTP on 127.0.0.1. Each setting can be overridden; with the
# defaults, `manage.py check --deploy` reports nothing (tests/ops/test_deploy_check.py).
HTTPS = envbool("CONSOLE_HTTPS", "True" if os.getenv("CONSOLE_SECRET_KEY") else "False")
_https = str(HTTPS)
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = envbool("CONSOLE_SECURE_COOKIES", _https)
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
SECURE_SSL_REDIRECT = envbool("CONSOLE_SSL_REDIRECT", _https)
# Liveness probes answer load balancers that probe over plain HTTP.
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^api/healthz$"]
SECURE_HSTS_SECONDS = envint("CONSOLE_HSTS_SECONDS", "31536000" if HTTPS else "0")
SECURE_HSTS_INCLUDE_SUBDOMAINS = envbool("CONSOLE_HSTS_INCLUDE_SUBDOMAINS", _https)
SECURE_HSTS_PRELOAD = envbool("CONSOLE_HSTS_PRELOAD", _https)
# The TLS-terminating proxy says the request came over HTTPS (it must set or strip it).
if _proxy_header := os.getenv("CONSOLE_PROXY_SSL_HEADER", "X-Forwarded-Proto" if HTTPS else ""):
    SECURE_PROXY_SSL_HEADER = ("HTTP_" + _proxy_header.upper().replace("-", "_"), "https")
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
# Run artifacts: "database" (default) keeps their bytes in the database, so a web server
# serves what a worker on another machine produced; otherwise a Django storage backend's
# dotted path (e.g. django-storages' "storages.backends.s3.S3Storage", installed
# separately) with its options as JSON in CONSOLE_ARTIFACT_STORAGE_OPTIONS.
ARTIFACT_STORAGE = os.getenv("CONSOLE_ARTIFACT_STORAGE", "database").strip() or "database"
if ARTIFACT_STORAGE != "database":
    STORAGES["artifacts"] = {
        "BACKEND": ARTIFACT_STORAGE,
        "OPTIONS": json.loads(os.getenv("CONSOLE_ARTIFACT_STORAGE_OPTIONS", "") or "{}"),
    }
# ---------------------------------------------------------------------------------------
DATA_UPLOAD_MAX_MEMORY_SIZE = 25 * 1024 * 1024

# Secrets: comma-separated Fernet keys, the first one encrypts. Unset means a generated
# development key file in STATE_DIR (and a warning banner).
CONSOLE_ENCRYPTION_KEYS = envlist("CONSOLE_ENCRYPTION_KEYS", "")
ENCRYPTION_KEY_FILE = STATE_DIR / "encryption.key"
# The signing root public key (base64 of the raw 32 bytes) the console trusts keys.json by
# (docs/signing.md). Unset: the pin written to DATA_PATH/signing/root.json when the key
# ring was created. Never the database alone, so a database edit cannot swap the root.
CONSOLE_SIGNING_ROOT_KEY = os.getenv("CONSOLE_SIGNING_ROOT_KEY", "").strip()

# Celery. The default broker is kombu's filesystem transport: no server needed, and a real
# worker process consumes from it. Run state lives in the database, so results are ignored.
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _queue = STATE_DIR / "broker" / "queue"
    _processed = STATE_DIR / "broker" / "processed"
    _control = STATE_DIR / "broker" / "control"
    _quarantine = STATE_DIR / "broker" / "quarantine"
    for _folder in (_queue, _processed, _control, _quarantine):
        _folder.mkdir(parents=True, exist_ok=True)
    # kombu's filesystem transport, made safe: a message appears only when complete and a
    # bad message file is quarantined instead of killing the worker (tools_app/ops/broker.py).
    CELERY_BROKER_TRANSPORT = "tools_app.ops.broker:Transport"
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue),
        "data_folder_out": str(_queue),
        "processed_folder": str(_processed),
        # Without it kombu writes its exchange tables into the current directory.
        "control_folder": str(_control),
        "store_processed": False,
        "quarantine_folder": str(_quarantine),
        # kombu polls the folder once a second by default and every run would wait for it.
        # Every 20 ms: ~15 ms median queue wait for ~1.4% of a core while idle (0.1 s gave
        # 72 ms and 0.4%; measured with bench/invoke.py --broker filesystem).
        "polling_interval": 0.02,
    }
CELERY_TASK_DEFAULT_QUEUE = os.getenv("CELERY_TASK_DEFAULT_QUEUE", "console")
CELERY_TASK_IGNORE_RESULT = True
# Tool side effects are not idempotent: acknowledge before running so a redelivery after a
# worker crash never runs a tool twice (the reaper marks such runs lost instead).
CELERY_TASK_ACKS_LATE = False
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
CELERY_TASK_SERIALIZER = "json"
CELERY_ACCEPT_CONTENT = ["json"]
CELERY_BROKER_CONNECTION_RETRY_ON_STARTUP = True
# Celery's Django fixup closes every database connection around each task unless this is
# set; console/celery.py closes unusable or obsolete ones instead, as Django does per request.
CELERY_DB_REUSE_MAX = 1_000_000
CELERY_BEAT_SCHEDULE = {
    "reap-lost-runs": {"task": "tools_app.tasks.reap_lost_runs", "schedule": 15.0},
    # OAuth tokens due within twice the margin are refreshed before a run waits for them.
    "refresh-oauth-tokens": {"task": "tools_app.tasks.refresh_oauth_tokens", "schedule": 60.0},
    # The secret-usage ledger's retention (tools_app/integrations/ledger.py prune).
    "prune-secret-ledger": {"task": "tools_app.tasks.prune_secret_ledger", "schedule": 3600.0},
    # The Analytics tab's hourly rollups (tools_app/analytics/rollup.py): each hour is
    # rolled up within minutes of closing, before a page needs to.
    "roll-up-runs": {"task": "tools_app.tasks.roll_up_runs", "schedule": 300.0},
}
# Secret-usage ledger rows older than this are deleted (the chain's checkpoint is kept).
LEDGER_RETENTION_DAYS = envint("CONSOLE_LEDGER_RETENTION_DAYS", "365")
# A token this close to expiry is refreshed before a run gets it (tools_app/integrations/oauth.py).
OAUTH_REFRESH_MARGIN = envint("CONSOLE_OAUTH_REFRESH_MARGIN", "300")

# Runner limits (docs/runs.md); settings may lower or raise them.
RUNNER_MEMORY_MB = envint("CONSOLE_RUNNER_MEMORY_MB", "512")
RUNNER_MAX_PROCESSES = envint("CONSOLE_RUNNER_MAX_PROCESSES", "64")
# CPU time per run (a cgroup's cpu.max): a run over it is slowed down, not stopped.
RUNNER_CPUS = envcpus("CONSOLE_RUNNER_CPUS", "1")
RUNNER_GRACE_SECONDS = float(os.getenv("CONSOLE_RUNNER_GRACE_SECONDS", "5"))
# Everything one run may write (work dir, /tmp, output); see tools_app/runner/quota.py.
RUNNER_DISK_MB = envint("CONSOLE_RUNNER_DISK_MB", "512")
RUN_HEARTBEAT_SECONDS = float(os.getenv("CONSOLE_RUN_HEARTBEAT_SECONDS", "5"))
# Host folders every tool may read (read-only), e.g. where audio files to convert live.
TOOL_INPUT_DIRS = envlist("CONSOLE_TOOL_INPUT_DIRS", "")

# The env bridge (GET /api/v1/env, scope secrets:read) hands integration values to agents
# that run tools themselves; off unless set to "on".
CONSOLE_ENV_BRIDGE = os.getenv("CONSOLE_ENV_BRIDGE", "off").strip().lower() == "on"
RUN_LOST_AFTER_SECONDS = envint("CONSOLE_RUN_LOST_AFTER_SECONDS", "30")
# Egress exceptions (tools_app/egress/policy.py): comma-separated CIDR, host:port or CIDR:port.
TOOL_NETWORK_ALLOW = os.getenv("CONSOLE_TOOL_NETWORK_ALLOW", "")
# The DNS server tools use (an IP); empty: the host's resolver, through slirp4netns.
TOOL_DNS = os.getenv("CONSOLE_TOOL_DNS", "")
# A queued run no worker has claimed after this long is sent again once; still unclaimed
# after as long again, it is marked lost (tools_app/runs/reaper.py reap_lost_runs).
RUN_QUEUED_TIMEOUT_SECONDS = envint("CONSOLE_RUN_QUEUED_TIMEOUT_SECONDS", "600")
# How long the API (POST .../check {"wait"}) and `test_tools` wait at most for a version's
# cases (docs/cases.md); a check still running then is answered as running.
CASES_PUBLISH_WAIT_SECONDS = envint("CONSOLE_CASES_PUBLISH_WAIT_SECONDS", "120")
# Each worker writes a WorkerHeartbeat row this often; one older than three beats is dead.
WORKER_HEARTBEAT_SECONDS = float(os.getenv("CONSOLE_WORKER_HEARTBEAT_SECONDS", "5"))

# Log lines: "plain" text, or "json" (one object a line with the request id and run id that
# follow a run from the web to the worker, tools_app/ops/logcontext.py): the default where
# CONSOLE_SECRET_KEY is set, i.e. in production, as for the HTTPS settings.
LOG_FORMAT = (
    os.getenv("CONSOLE_LOG_FORMAT", "json" if os.getenv("CONSOLE_SECRET_KEY") else "plain")
    .strip()
    .lower()
)
if LOG_FORMAT not in ("plain", "json"):
    raise ImproperlyConfigured(f"CONSOLE_LOG_FORMAT must be plain or json, not {LOG_FORMAT!r}")
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "tools_app.ops.logcontext.ContextFilter"}},
    "formatters": {
        "plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"},
        "json": {"()": "tools_app.ops.logcontext.JsonFormatter"},
    },
    "handlers": {
        "console": {
            "class": "logging.StreamHandler",
            "formatter": LOG_FORMAT,
            "filters": ["context"],
        }
    },
    "root": {"handlers": ["console"], "level": os.getenv("CONSOLE_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}

# /metrics (tools_app/views/metrics.py): open to anyone when on (a private scrape network),
# else only to agent tokens with the metrics:read scope. What it reads from the database
# is computed at most once per CONSOLE_METRICS_CACHE_SECONDS, whoever scrapes.
METRICS_PUBLIC = envbool("CONSOLE_METRICS_PUBLIC", "False")
METRICS_CACHE_SECONDS = float(os.getenv("CONSOLE_METRICS_CACHE_SECONDS", "10"))
if METRICS_PUBLIC:
    # A scraper on the private network may speak plain HTTP: no token rides on it then.
    SECURE_REDIRECT_EXEMPT.append(r"^metrics$")

# --------------------------------------------------------------------------------------
# Trust boundary around the edges (docs/security.md, "Around the edges").

# Login throttling (django-axes): CONSOLE_LOGIN_FAILURE_LIMIT wrong passwords for one
# username lock that username out for CONSOLE_LOGIN_LOCKOUT_MINUTES, on the console's and
# Django admin's login alike. Keyed on the username alone, not the client IP: behind a
# proxy every client has one IP, and an attacker with many IPs would get 10 tries per IP.
INSTALLED_APPS += ["axes", "csp"]
AUTHENTICATION_BACKENDS = [
    "axes.backends.AxesStandaloneBackend",  # first: refuses a locked-out username
    "django.contrib.auth.backends.ModelBackend",
]
MIDDLEWARE += ["axes.middleware.AxesMiddleware"]
AXES_FAILURE_LIMIT = envint("CONSOLE_LOGIN_FAILURE_LIMIT", "10")
AXES_COOLOFF_TIME = timedelta(minutes=envint("CONSOLE_LOGIN_LOCKOUT_MINUTES", "15"))
AXES_LOCKOUT_PARAMETERS = ["username"]
AXES_RESET_ON_SUCCESS = True
AXES_LOCKOUT_CALLABLE = "tools_app.views.auth.locked_out"
# Client IPs are recorded from REMOTE_ADDR only: a forwarded header is client-chosen.
AXES_IPWARE_META_PRECEDENCE_ORDER = ("REMOTE_ADDR",)
LOGGING["loggers"]["axes"] = {"level": "WARNING"}  # failures and locks, not every login
# W006 warns that without ip_address an attacker may rotate User-Agents or cookies; with
# username as the only parameter neither is part of the key (tests/views/test_login_throttle.py).
SILENCED_SYSTEM_CHECKS = ["axes.W006"]

# Content-Security-Policy (django-csp): scripts only from the console's own static files
# (or a nonce), never inline; styles may be inline (CodeMirror and Swagger UI set them).
_security = MIDDLEWARE.index("django.middleware.security.SecurityMiddleware")
MIDDLEWARE.insert(_security + 1, "csp.middleware.CSPMiddleware")
TEMPLATES[0]["OPTIONS"]["context_processors"].append("csp.context_processors.nonce")
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'", CSP_NONCE],
        "style-src": ["'self'", "'unsafe-inline'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'none'"],
        "form-action": ["'self'"],
        "frame-ancestors": ["'none'"],
    },
}


# Private state: STATE_DIR and the folders the console keeps in it are 0700, the secret
# files in it 0600 (the secret key and encryption key are created 0600 where they are
# made; an older, looser one is tightened here). A SQLite database is created here, empty
# and 0600, before SQLite first opens it; SQLite gives its -wal and -shm files the
# database file's mode (tools_app/ops/statedir.py covers databases made elsewhere).
def _private(path: Path, mode: int) -> None:
    with contextlib.suppress(FileNotFoundError, PermissionError):  # another user's: left
        if path.stat().st_mode & 0o777 != mode:
            path.chmod(mode)


for _folder in (STATE_DIR, STATIC_ROOT, ARTIFACTS_PATH, RUNS_WORK_PATH):
    _folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    _private(_folder, 0o700)
if CELERY_BROKER_URL == "filesystem://":
    for _folder in (_queue.parent, _queue, _processed, _control):
        _private(_folder, 0o700)
for _file in (STATE_DIR / "secret_key", ENCRYPTION_KEY_FILE):
    _private(_file, 0o600)
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    _db = Path(str(DATABASES["default"]["NAME"]))
    if not str(_db).startswith((":memory:", "file:")) and _db.parent.is_dir():
        os.close(os.open(_db, os.O_WRONLY | os.O_CREAT, 0o600))
        _private(_db, 0o600)
