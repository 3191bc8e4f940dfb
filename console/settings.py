"""Tool Console settings: everything that varies between installs comes from env vars."""

import os
import secrets
from pathlib import Path

import dj_database_url


def envbool(name: str, default: str) -> bool:
    return os.getenv(name, default).strip().lower() in ("1", "true", "yes", "on")


def envint(name: str, default: str) -> int:
    return int(os.getenv(name, default))


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
    "django.middleware.security.SecurityMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
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

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.UserAttributeSimilarityValidator"},
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
    {"NAME": "django.contrib.auth.password_validation.NumericPasswordValidator"},
]

LOGIN_URL = "login"
LOGIN_REDIRECT_URL = "tools"
LOGOUT_REDIRECT_URL = "login"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True

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

SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_SECURE = envbool("CONSOLE_SECURE_COOKIES", "False")
CSRF_COOKIE_SECURE = SESSION_COOKIE_SECURE
X_FRAME_OPTIONS = "DENY"
SECURE_CONTENT_TYPE_NOSNIFF = True
DATA_UPLOAD_MAX_MEMORY_SIZE = 25 * 1024 * 1024

# Secrets: comma-separated Fernet keys, the first one encrypts. Unset means a generated
# development key file in STATE_DIR (and a warning banner).
CONSOLE_ENCRYPTION_KEYS = envlist("CONSOLE_ENCRYPTION_KEYS", "")
ENCRYPTION_KEY_FILE = STATE_DIR / "encryption.key"

# Celery. The default broker is kombu's filesystem transport: no server needed, and a real
# worker process consumes from it. Run state lives in the database, so results are ignored.
CELERY_BROKER_URL = os.getenv("CELERY_BROKER_URL", "filesystem://")
if CELERY_BROKER_URL == "filesystem://":
    _queue = STATE_DIR / "broker" / "queue"
    _processed = STATE_DIR / "broker" / "processed"
    _control = STATE_DIR / "broker" / "control"
    for _folder in (_queue, _processed, _control):
        _folder.mkdir(parents=True, exist_ok=True)
    CELERY_BROKER_TRANSPORT_OPTIONS = {
        "data_folder_in": str(_queue),
        "data_folder_out": str(_queue),
        "processed_folder": str(_processed),
        # Without it kombu writes its exchange tables into the current directory.
        "control_folder": str(_control),
        "store_processed": False,
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
}

# Runner limits (DESIGN section 3); settings may lower or raise them.
RUNNER_MEMORY_MB = envint("CONSOLE_RUNNER_MEMORY_MB", "512")
RUNNER_MAX_PROCESSES = envint("CONSOLE_RUNNER_MAX_PROCESSES", "64")
RUNNER_GRACE_SECONDS = float(os.getenv("CONSOLE_RUNNER_GRACE_SECONDS", "5"))
RUN_HEARTBEAT_SECONDS = float(os.getenv("CONSOLE_RUN_HEARTBEAT_SECONDS", "5"))
# Host folders every tool may read (read-only), e.g. where audio files to convert live.
TOOL_INPUT_DIRS = envlist("CONSOLE_TOOL_INPUT_DIRS", "")

# The env bridge (GET /api/v1/env, scope secrets:read) hands integration values to agents
# that run tools themselves; off unless set to "on".
CONSOLE_ENV_BRIDGE = os.getenv("CONSOLE_ENV_BRIDGE", "off").strip().lower() == "on"
RUN_LOST_AFTER_SECONDS = envint("CONSOLE_RUN_LOST_AFTER_SECONDS", "30")

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    "root": {"handlers": ["console"], "level": os.getenv("CONSOLE_LOG_LEVEL", "INFO")},
    "loggers": {"django.db.backends": {"level": "INFO"}},
}
