"""gpucloud settings, read from the environment (docs/configuration.md lists every variable).

With nothing set, the embedded default works: SQLite files under `var/` for data and for the task broker, a
generated secret key kept in `var/secret_key`, and the demo fleet.
"""

from __future__ import annotations

import secrets
from pathlib import Path

import dj_database_url

from gpucloud import __version__
from gpucloud.env import (
    ConfigError,
    env_bool,
    env_choice,
    env_float,
    env_int,
    env_list,
    env_networks,
    env_str,
)

BASE_DIR = Path(__file__).resolve().parent.parent
VAR_DIR = Path(env_str("GPUCLOUD_VAR_DIR", str(BASE_DIR / "var")))
VAR_DIR.mkdir(parents=True, exist_ok=True)

DEBUG = env_bool("DEBUG", False)
# The embedded default is the single-machine mode of `make run`: no DATABASE_URL, SQLite under var/.
EMBEDDED = not env_str("DATABASE_URL")


def _secret_key() -> str:
    key = env_str("SECRET_KEY")
    if key:
        return key
    if not DEBUG and EMBEDDED is False:
        raise ConfigError("SECRET_KEY is required when DEBUG is off and DATABASE_URL is set (production)")
    # The embedded default keeps one generated key so sessions and token digests survive restarts.
    path = VAR_DIR / "secret_key"
    if not path.exists():
        path.write_text(secrets.token_urlsafe(50))
        path.chmod(0o600)
    return path.read_text().strip()


SECRET_KEY = _secret_key()


def _encryption_keys() -> list[str]:
    keys = env_list("GPUCLOUD_ENCRYPTION_KEYS", [])
    if keys:
        return keys
    if not EMBEDDED:
        raise ConfigError(
            "GPUCLOUD_ENCRYPTION_KEYS is required with DATABASE_URL set: one or more Fernet keys, "
            "comma-separated, the first encrypts; make one with: "
            "python -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'"
        )
    # The embedded default keeps a generated key beside its database.
    path = VAR_DIR / "encryption_key"
    if not path.exists():
        from cryptography.fernet import Fernet

        path.write_text(Fernet.generate_key().decode())
        path.chmod(0o600)
    return [path.read_text().strip()]


ENCRYPTION_KEYS = _encryption_keys()
ALLOWED_HOSTS = env_list("ALLOWED_HOSTS", ["127.0.0.1", "localhost", "[::1]", "testserver"])
CSRF_TRUSTED_ORIGINS = env_list("CSRF_TRUSTED_ORIGINS", [])

# No django.contrib.admin: people sign in only through the portal's sign-in (throttled, audited), and every
# change goes through the services, which audit it. Platform administrators are named at the console
# (`manage.py platform_admin`) or by OIDC_ADMIN_GROUPS.
INSTALLED_APPS = [
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "rest_framework",
    "django_filters",
    "drf_spectacular",
    "drf_spectacular_sidecar",
    "mozilla_django_oidc",
    "django_htmx",
    # The layers, lowest first (docs/architecture.md, "Layers"); `fleet` and `clusters` keep their old labels.
    "core",
    "fleet",
    "tenants",
    "placement",
    "health",
    "inference",
    "billing",
    "clusters",
    "simulator",
    "gitops",
    "portal",
]

MIDDLEWARE = [
    "gpucloud.observability.RequestContextMiddleware",
    "gpucloud.api.middleware.RefuseNulMiddleware",
    "django.middleware.security.SecurityMiddleware",
    # Static files are answered here, before sessions and the CSP: they are not documents and need neither.
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "csp.middleware.CSPMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "django_htmx.middleware.HtmxMiddleware",
    "portal.middleware.ServiceErrorPage",
]

ROOT_URLCONF = "gpucloud.urls"
WSGI_APPLICATION = "gpucloud.wsgi.application"
# Called once when a web process starts (gpucloud/wsgi.py): read the OpenID provider's discovery document in
# the background, so a misconfigured provider shows in the log at start-up rather than at the first sign-in.
WSGI_STARTUP = ["tenants.sso.warm_up"]
# Which manifest source declares an object (core/declared.py): the record is the gitops layer's, above the
# services that ask, so they reach it by this name, resolved at run time.
DECLARATION_LOOKUP = "gitops.ownership.declaration"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [],
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

DATABASE_URL = env_str("DATABASE_URL", f"sqlite:///{VAR_DIR / 'gpucloud.sqlite3'}")
try:
    DATABASES = {"default": dj_database_url.parse(DATABASE_URL, conn_max_age=60, conn_health_checks=True)}
except ValueError as exc:
    raise ConfigError(f"DATABASE_URL cannot be used: {exc}; use postgres://… or sqlite:///path") from exc
if DATABASES["default"]["ENGINE"] == "django.db.backends.sqlite3":
    # Web, worker and beat share the file: wait for the writer instead of failing with "database is locked".
    DATABASES["default"]["OPTIONS"] = {"timeout": 20, "transaction_mode": "IMMEDIATE"}
    DATABASES["default"]["CONN_MAX_AGE"] = 0
    # What SQLite cannot hold, and why the embedded default does without it: the ledger's covering indexes
    # (W040) only save PostgreSQL a heap read; the one open quarantine per node-wide target (W047, NULLS NOT
    # DISTINCT) is kept by its writer, `health.services.quarantines`, which runs under SQLite's one writer
    # at a time (IMMEDIATE transactions). PostgreSQL, the production database, enforces both.
    SILENCED_SYSTEM_CHECKS = ["models.W040", "models.W047"]
# Which gpucloud process this is (`gpucloud web|worker|scheduler|migrate` set it); PostgreSQL shows it in
# pg_stat_activity.application_name, so an operator sees who holds the connections.
PROCESS = env_str("GPUCLOUD_PROCESS", "manage")
DB_POOL = env_bool("GPUCLOUD_DB_POOL", True)
if DATABASES["default"]["ENGINE"] == "django.db.backends.postgresql":
    DATABASES["default"].setdefault("OPTIONS", {})["application_name"] = f"gpucloud-{PROCESS}"
    if DB_POOL:
        # One pool per process, shared by its threads; a thread borrows a connection for a request or a task
        # and gives it back. PostgreSQL then sees at most processes × max_size connections, whatever the load.
        # `gpucloud web` and `gpucloud worker` size it to their threads unless GPUCLOUD_DB_POOL_MAX_SIZE says.
        # Pooling replaces persistent connections (Django requires CONN_MAX_AGE 0 with a pool).
        DATABASES["default"]["CONN_MAX_AGE"] = 0
        _pool = {
            "min_size": env_int("GPUCLOUD_DB_POOL_MIN_SIZE", 1, minimum=0),
            "max_size": env_int("GPUCLOUD_DB_POOL_MAX_SIZE", 10, minimum=1),
            "timeout": env_float("GPUCLOUD_DB_POOL_TIMEOUT", 10.0, minimum=0.1),
            "name": f"gpucloud-{PROCESS}",
        }
        DATABASES["default"]["OPTIONS"]["pool"] = _pool
        if _pool["min_size"] > _pool["max_size"]:  # type: ignore[operator]
            raise ConfigError("GPUCLOUD_DB_POOL_MIN_SIZE is above GPUCLOUD_DB_POOL_MAX_SIZE")

DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"
AUTH_PASSWORD_VALIDATORS = [
    {"NAME": "django.contrib.auth.password_validation.MinimumLengthValidator"},
    {"NAME": "django.contrib.auth.password_validation.CommonPasswordValidator"},
]
LOGIN_URL = "portal:login"
LOGIN_REDIRECT_URL = "portal:dashboard"
LOGOUT_REDIRECT_URL = "portal:login"

# --- Identity (docs/sso.md) ------------------------------------------------------------------------------
# Local password accounts serve the embedded default; production usually signs in only through OIDC.
LOCAL_LOGIN = env_bool("GPUCLOUD_LOCAL_LOGIN", True)
OIDC_ISSUER = env_str("OIDC_ISSUER").rstrip("/")
OIDC_RP_CLIENT_ID = env_str("OIDC_CLIENT_ID")
OIDC_RP_CLIENT_SECRET = env_str("OIDC_CLIENT_SECRET")
OIDC_RP_SCOPES = env_str("OIDC_SCOPES", "openid email profile groups")
OIDC_GROUPS_CLAIM = env_str("OIDC_GROUPS_CLAIM", "groups")
OIDC_ADMIN_GROUPS = env_list("OIDC_ADMIN_GROUPS", [])
OIDC_TENANT_GROUP_PATTERN = env_str("OIDC_TENANT_GROUP_PATTERN", "gpucloud:{tenant}:{role}")
OIDC_TIMEOUT = env_float("OIDC_TIMEOUT", 5.0, minimum=0.1)
# Invitations are claimed by e-mail address: an address counts only if the provider says it verified it
# (`email_verified`), unless the operator trusts every address the provider sends (docs/sso.md).
OIDC_TRUST_EMAIL = env_bool("OIDC_TRUST_EMAIL", False)
# An account the provider made over SCIM is linked to its first sign-in by this claim = the SCIM userName.
OIDC_SCIM_LINK_CLAIM = env_str("OIDC_SCIM_LINK_CLAIM", "preferred_username")
OIDC_RP_SIGN_ALGO = "RS256"
OIDC_USE_PKCE = True
OIDC_PKCE_CODE_CHALLENGE_METHOD = "S256"
OIDC_OP_LOGOUT_URL_METHOD = "tenants.sso.provider_logout_url"
if OIDC_ISSUER and not (OIDC_RP_CLIENT_ID and OIDC_RP_CLIENT_SECRET):
    raise ConfigError("OIDC_ISSUER is set: OIDC_CLIENT_ID and OIDC_CLIENT_SECRET (or _FILE) are needed too")
if not LOCAL_LOGIN and not OIDC_ISSUER:
    raise ConfigError("GPUCLOUD_LOCAL_LOGIN=false needs OIDC_ISSUER, or nobody could sign in")
AUTHENTICATION_BACKENDS = (["django.contrib.auth.backends.ModelBackend"] if LOCAL_LOGIN else []) + (
    ["tenants.sso.Backend"] if OIDC_ISSUER else []
)
# Tenant clusters (docs/kubernetes.md, "Cluster access"): with OIDC_ISSUER set, each vCluster's API server
# trusts
# the same issuer for a public client of its own, used by `kubectl oidc-login`; without it, each member gets a
# ServiceAccount of their own inside the vCluster and short-lived tokens of it.
OIDC_KUBERNETES_CLIENT_ID = env_str("OIDC_KUBERNETES_CLIENT_ID", "gpucloud-cli")
OIDC_KUBERNETES_USERNAME_CLAIM = env_choice("OIDC_KUBERNETES_USERNAME_CLAIM", "sub", {"sub", "email"})
OIDC_KUBERNETES_PREFIX = env_str("OIDC_KUBERNETES_PREFIX", "oidc:")
CLUSTER_TOKEN_TTL = env_int("GPUCLOUD_CLUSTER_TOKEN_TTL", 8 * 3600, minimum=600)
CLUSTER_ACCESS_RESYNC = env_float("GPUCLOUD_CLUSTER_ACCESS_RESYNC", 600.0, minimum=1.0)
CLUSTER_ACCESS_RETRY = env_float("GPUCLOUD_CLUSTER_ACCESS_RETRY", 60.0, minimum=0.0)
# Idle clusters (docs/kubernetes.md): a tenant whose GPUs stayed under IDLE_UTILISATION for IDLE_WINDOW
# seconds is flagged, and put to sleep when it opted in. VCLUSTER_SLEEP_AFTER_INACTIVITY: every vCluster's
# default sleep-mode delay.
IDLE_WINDOW = env_float("GPUCLOUD_IDLE_WINDOW", 4 * 3600.0, minimum=60.0)
IDLE_UTILISATION = env_float("GPUCLOUD_IDLE_UTILISATION", 0.05, minimum=0.0)
IDLE_CHECK_INTERVAL = env_float("GPUCLOUD_IDLE_CHECK_INTERVAL", 900.0, minimum=10.0)
VCLUSTER_SLEEP_AFTER_INACTIVITY = env_str("GPUCLOUD_VCLUSTER_SLEEP_AFTER_INACTIVITY", "")
# What tenants' pods may do on Kubernetes host clusters (docs/kubernetes.md, "What holds on the cluster, and
# what enforces it"): the Pod Security Standard each trust tier's host namespace and vCluster enforce, and the
# tiers whose pods may open connections to public addresses (DNS and their own namespace stay allowed).
POD_SECURITY = {
    tier: env_choice(f"GPUCLOUD_POD_SECURITY_{tier.upper()}", level, {"privileged", "baseline", "restricted"})
    for tier, level in (("isolated", "restricted"), ("standard", "baseline"), ("trusted", "baseline"))
}
EGRESS_INTERNET = {
    tier: env_bool(f"GPUCLOUD_EGRESS_INTERNET_{tier.upper()}", True)
    for tier in ("isolated", "standard", "trusted")
}
LOGIN_ATTEMPTS = env_int("GPUCLOUD_LOGIN_ATTEMPTS", 10, minimum=1)
LOGIN_ATTEMPTS_WINDOW = env_int("GPUCLOUD_LOGIN_ATTEMPTS_WINDOW", 300, minimum=1)
LOGIN_ATTEMPTS_PER_ADDRESS = env_int("GPUCLOUD_LOGIN_ATTEMPTS_PER_ADDRESS", 100, minimum=1)

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = False
USE_TZ = True

STATIC_URL = "static/"
STATIC_ROOT = VAR_DIR / "static"
STATIC_ROOT.mkdir(exist_ok=True)
# WhiteNoise serves the static files (the portal's CSS, Swagger UI) in every mode, DEBUG on or off. The
# embedded default takes them straight from the apps, so `make run` has nothing to collect and nothing goes
# stale on an upgrade; production serves what `manage.py collectstatic` put into STATIC_ROOT at deploy time.
WHITENOISE_USE_FINDERS = EMBEDDED or DEBUG

# --- Transport and browser security ----------------------------------------------------------------------
# Production (DEBUG off, DATABASE_URL set) is served over HTTPS: secure cookies, HSTS, redirects to https.
# The embedded default and the test servers speak plain HTTP on loopback and set GPUCLOUD_HTTPS=false.
HTTPS = env_bool("GPUCLOUD_HTTPS", not DEBUG and not EMBEDDED)
SESSION_COOKIE_SECURE = CSRF_COOKIE_SECURE = HTTPS
SESSION_COOKIE_HTTPONLY = True
SESSION_COOKIE_AGE = env_int("GPUCLOUD_SESSION_AGE", 12 * 3600, minimum=60)
SECURE_SSL_REDIRECT = HTTPS and env_bool("GPUCLOUD_SSL_REDIRECT", True)
SECURE_REDIRECT_EXEMPT = [r"^healthz$", r"^readyz$", r"^metrics$"]
SECURE_HSTS_SECONDS = env_int("GPUCLOUD_HSTS_SECONDS", 31_536_000 if HTTPS else 0, minimum=0)
SECURE_HSTS_INCLUDE_SUBDOMAINS = SECURE_HSTS_PRELOAD = SECURE_HSTS_SECONDS > 0
if env_bool("GPUCLOUD_BEHIND_TLS_PROXY", False):
    SECURE_PROXY_SSL_HEADER = ("HTTP_X_FORWARDED_PROTO", "https")
X_FRAME_OPTIONS = "DENY"
# No inline script or style anywhere: the portal and the API docs load their own static files.
_FORM_TARGETS = ["'self'"] + ([OIDC_ISSUER] if OIDC_ISSUER else [])
CONTENT_SECURITY_POLICY = {
    "DIRECTIVES": {
        "default-src": ["'self'"],
        "script-src": ["'self'"],
        "style-src": ["'self'"],
        "img-src": ["'self'", "data:"],
        "connect-src": ["'self'"],
        "object-src": ["'none'"],
        "base-uri": ["'self'"],
        "frame-ancestors": ["'none'"],
        "form-action": _FORM_TARGETS,
    }
}
# Rate limits, throttles and sign-in lock-outs count in this cache, so it must be shared by every process
# that answers requests (gunicorn's workers, every web pod): Redis when GPUCLOUD_CACHE_URL names one, else
# the database (gpucloud/cache.py, table made by a migration), on PostgreSQL and on the embedded SQLite alike.
# Never a per-process cache: each of N workers would count to the limit by itself.
CACHES = {
    "default": (
        {"BACKEND": "django.core.cache.backends.redis.RedisCache", "LOCATION": env_str("GPUCLOUD_CACHE_URL")}
        if env_str("GPUCLOUD_CACHE_URL")
        else {
            "BACKEND": "gpucloud.cache.DatabaseCache",
            "LOCATION": "gpucloud_cache",  # gpucloud.cache.TABLE
            # Culling (past MAX_ENTRIES rows) would drop counts an attacker wants gone: keep many. Rows expire
            # with their window (GPUCLOUD_LOGIN_ATTEMPTS_WINDOW, a minute for throttles) and go first.
            "OPTIONS": {"MAX_ENTRIES": 100_000},
        }
    )
}
GPUCLOUD_THROTTLE_RATES = {"tokens": env_str("GPUCLOUD_TOKEN_RATE", "60/min")}

REST_FRAMEWORK = {
    "DEFAULT_AUTHENTICATION_CLASSES": [
        "tenants.authentication.BearerTokenAuthentication",
        "rest_framework.authentication.SessionAuthentication",
    ],
    "DEFAULT_PERMISSION_CLASSES": [
        "rest_framework.permissions.IsAuthenticated",
        "tenants.api.permissions.TokenScope",
    ],
    "DEFAULT_PAGINATION_CLASS": "gpucloud.api.pagination.Pagination",
    "PAGE_SIZE": 50,
    "DEFAULT_FILTER_BACKENDS": ["django_filters.rest_framework.DjangoFilterBackend"],
    "DEFAULT_SCHEMA_CLASS": "gpucloud.api.schema.AutoSchema",
    "EXCEPTION_HANDLER": "gpucloud.api.problems.exception_handler",
    "DEFAULT_RENDERER_CLASSES": ["rest_framework.renderers.JSONRenderer"],
    # JSON with a nesting limit and no NUL (gpucloud/api/parsers.py); forms as DRF has them.
    "DEFAULT_PARSER_CLASSES": [
        "gpucloud.api.parsers.JSONParser",
        "rest_framework.parsers.FormParser",
        "rest_framework.parsers.MultiPartParser",
    ],
    "UNAUTHENTICATED_USER": "django.contrib.auth.models.AnonymousUser",
}
SPECTACULAR_SETTINGS = {
    "TITLE": "gpucloud API",
    "DESCRIPTION": "Tenants, quotas and capacity of a multi-tenant GPU cloud.",
    "VERSION": __version__,  # pyproject.toml's (gpucloud/__init__.py)
    "SERVE_INCLUDE_SCHEMA": False,
    "COMPONENT_SPLIT_REQUEST": True,
    "SCHEMA_PATH_PREFIX": "/api/v1",
    # OpenAPI 3.1 (JSON Schema 2020-12): a nullable object is `oneOf: [{$ref}, {type: null}]`. 3.0 can only
    # write it `{allOf: [{$ref}], nullable: true}`, which rejects null (nullable needs a type beside it), so
    # validators refused every healthy node's `quarantine: null`. The hook writes other nulls as 3.1 does.
    "OAS_VERSION": "3.1.0",
    "POSTPROCESSING_HOOKS": [
        "drf_spectacular.hooks.postprocess_schema_enums",
        "gpucloud.api.schema.null_as_in_openapi_31",
    ],
    # bearerAuth comes from tenants.authentication.BearerTokenScheme, sessions from drf-spectacular.
    "ENUM_NAME_OVERRIDES": {
        "TenantStateEnum": "tenants.models.Tenant.State",
        "HostClusterStateEnum": "fleet.models.HostCluster.State",
        # A token's scope as stored (SCIM tokens too) and as a person may ask for one (never `scim`).
        "ApiTokenScopeEnum": "tenants.models.ApiToken.Scope",
        "TokenScopeEnum": "tenants.tokens.SCOPES",
    },
    # Swagger UI from the drf-spectacular-sidecar package: nothing is loaded from the internet.
    "SWAGGER_UI_DIST": "SIDECAR",
    "SWAGGER_UI_FAVICON_HREF": "SIDECAR",
    "REDOC_DIST": "SIDECAR",
}

# --- Workers ---------------------------------------------------------------------------------------------
# The embedded default's broker: a SQLite file under var/ through gpucloud/broker.py. Production uses Redis.
CELERY_BROKER_URL = env_str("CELERY_BROKER_URL", f"sqlite:///{VAR_DIR / 'broker.sqlite3'}")
if CELERY_BROKER_URL.startswith("filesystem:"):
    raise ConfigError(
        "CELERY_BROKER_URL=filesystem:// loses workers to a race between processes; leave it unset for the "
        "embedded SQLite broker (or sqlite:///path), or use redis://host:6379/0"
    )
if CELERY_BROKER_URL.startswith("sqlite:"):
    CELERY_BROKER_TRANSPORT = "gpucloud.broker:Transport"
elif CELERY_BROKER_URL.startswith(("redis://", "rediss://")):
    # kombu's Redis transport, screening what comes off a queue: a poison message is dropped, not fatal.
    CELERY_BROKER_TRANSPORT = "gpucloud.broker:RedisTransport"
CELERY_BEAT_SCHEDULE_FILENAME = str(VAR_DIR / "celerybeat-schedule")
# `gpucloud scheduler` runs beat with RedBeat: the schedule lives in Redis and a lock there lets only one of
# several running schedulers fire it; a standby takes over within the lock timeout of the leader dying.
CELERY_REDBEAT_REDIS_URL = env_str(
    "GPUCLOUD_SCHEDULER_REDIS_URL", CELERY_BROKER_URL if CELERY_BROKER_URL.startswith("redis") else ""
)
CELERY_REDBEAT_KEY_PREFIX = "gpucloud-redbeat"
CELERY_BEAT_MAX_LOOP_INTERVAL = 5  # seconds beat sleeps at most; the lock is extended at every wake-up
CELERY_REDBEAT_LOCK_TIMEOUT = env_int(
    "GPUCLOUD_SCHEDULER_LOCK_TIMEOUT", 30, minimum=CELERY_BEAT_MAX_LOOP_INTERVAL + 1
)

RECONCILE_INTERVAL = env_float("GPUCLOUD_RECONCILE_INTERVAL", 30.0, minimum=1.0)
REQUEUE_DELAY = env_float("GPUCLOUD_REQUEUE_DELAY", 1.0, minimum=0.05)
SIMULATED_PROVISION_DELAY = env_float("GPUCLOUD_SIM_PROVISION_DELAY", 2.0, minimum=0.0)
SIMULATED_DELETE_DELAY = env_float("GPUCLOUD_SIM_DELETE_DELAY", 1.0, minimum=0.0)
GPUCLOUD_FLEET = env_str("GPUCLOUD_FLEET", str(BASE_DIR / "deploy" / "fleets" / "demo.yaml"))
SHARED_GPU_REPLICAS = env_int("GPUCLOUD_SHARED_REPLICAS", 4, minimum=1)
# Inference endpoints (docs/inference.md): the vLLM image their model servers run, the CPU and memory of one
# replica, and the platform Gateway (name, namespace) their HTTPRoutes attach to.
INFERENCE_VLLM_IMAGE = env_str("GPUCLOUD_INFERENCE_VLLM_IMAGE", "docker.io/vllm/vllm-openai:v0.10.2")
INFERENCE_CPU = env_str("GPUCLOUD_INFERENCE_CPU", "4")
INFERENCE_MEMORY = env_str("GPUCLOUD_INFERENCE_MEMORY", "32Gi")
INFERENCE_GATEWAY_NAME = env_str("GPUCLOUD_INFERENCE_GATEWAY_NAME", "gpucloud-inference")
INFERENCE_GATEWAY_NAMESPACE = env_str("GPUCLOUD_INFERENCE_GATEWAY_NAMESPACE", "gpucloud-system")
# `gpucloud gateway` (docs/inference.md, "The gateway"; docs/operations.md): its Redis for the rpm/tpm windows
# (default: the broker's, when it is Redis), upstreams by `<tenant>/<endpoint>=<url>` overriding the
# endpoint's Service (`http://ie-<endpoint>.tenant-<tenant>.svc:8000`), and its timeouts in seconds.
GATEWAY_REDIS_URL = env_str("GPUCLOUD_GATEWAY_REDIS_URL")
GATEWAY_UPSTREAMS = dict(
    item.split("=", 1) for item in env_list("GPUCLOUD_GATEWAY_UPSTREAMS", []) if "=" in item
)
GATEWAY_CONNECT_TIMEOUT = env_float("GPUCLOUD_GATEWAY_CONNECT_TIMEOUT", 5.0, minimum=0.1)
GATEWAY_READ_TIMEOUT = env_float("GPUCLOUD_GATEWAY_READ_TIMEOUT", 600.0, minimum=1.0)
GATEWAY_DRAIN_DELAY = env_float("GPUCLOUD_GATEWAY_DRAIN_DELAY", 5.0, minimum=0.0)
GATEWAY_DRAIN_TIMEOUT = env_float("GPUCLOUD_GATEWAY_DRAIN_TIMEOUT", 120.0, minimum=0.0)
GATEWAY_DB_THREADS = env_int("GPUCLOUD_GATEWAY_DB_THREADS", 8, minimum=1)
# GPU partitions on Kubernetes host clusters (clusters/partitions/gpu_pass.py, docs/kubernetes.md,
# "Partitions").
GPU_OPERATOR_NAMESPACE = env_str("GPUCLOUD_GPU_OPERATOR_NAMESPACE", "gpu-operator")
MIG_CONFIGMAP = env_str("GPUCLOUD_MIG_CONFIGMAP", "gpucloud-mig-config")
DEVICE_PLUGIN_CONFIGMAP = env_str("GPUCLOUD_DEVICE_PLUGIN_CONFIGMAP", "gpucloud-device-plugin-config")
MIG_MAX_NODES = env_int("GPUCLOUD_MIG_MAX_NODES", 2, minimum=1)  # nodes being repartitioned at once
MIG_RETRY_SECONDS = env_float("GPUCLOUD_MIG_RETRY_SECONDS", 60.0, minimum=0.0)  # first backoff; doubles
MIG_RETRY_MAX_SECONDS = env_float("GPUCLOUD_MIG_RETRY_MAX_SECONDS", 3600.0, minimum=0.0)
ENDPOINT_DOMAIN = env_str("GPUCLOUD_ENDPOINT_DOMAIN", "gpucloud.internal")
STUCK_AFTER = env_float("GPUCLOUD_STUCK_AFTER", 600.0, minimum=1.0)
# The simulated fleet's workloads (simulator/workloads.py): on by default in the embedded default only.
SIM_WORKLOADS = env_bool("GPUCLOUD_SIM_WORKLOADS", EMBEDDED)
SIM_WORKLOAD_INTERVAL = env_float("GPUCLOUD_SIM_WORKLOAD_INTERVAL", 60.0, minimum=1.0)
SIM_SEED = env_int("GPUCLOUD_SIM_SEED", 42, minimum=0)
# --- Metering and billing --------------------------------------------------------------------------------
METER_INTERVAL = env_float("METER_INTERVAL", 30.0, minimum=1.0)
METER_MAX_GAP = env_float("METER_MAX_GAP", 2 * METER_INTERVAL, minimum=1.0)
METER_SCRAPE_TIMEOUT = env_float("METER_SCRAPE_TIMEOUT", 5.0, minimum=0.1)
# How long a Kubernetes host cluster's round waits for the live view to hold every pod event up to its time
# (docs/billing.md, "Waiting for the live view"); past it the round is billed with scrape edges, and reported.
METER_VIEW_WAIT = env_float("METER_VIEW_WAIT", 120.0, minimum=0.0)
BILLING_WEBHOOK_TIMEOUT = env_float("BILLING_WEBHOOK_TIMEOUT", 5.0, minimum=0.1)
# Budget webhooks go to public https addresses only (billing/webhooks.py), unless the operator says otherwise.
WEBHOOK_ALLOW_HTTP = env_bool("GPUCLOUD_WEBHOOK_ALLOW_HTTP", False)
WEBHOOK_ALLOWED_NETWORKS = env_networks("GPUCLOUD_WEBHOOK_ALLOWED_NETWORKS")
BILLING_ALERT_EMAIL_FROM = env_str("BILLING_ALERT_EMAIL_FROM", "")
EMAIL_HOST = env_str("EMAIL_HOST", "localhost")
EMAIL_PORT = env_int("EMAIL_PORT", 25, minimum=1)
BUDGET_CHECK_INTERVAL = env_float("BUDGET_CHECK_INTERVAL", 300.0, minimum=1.0)
# The per-round usage ledger on PostgreSQL: monthly partitions created ahead, months older than this dropped
# once wholly invoiced (billing/ledger_partitions.py); 0 keeps every month. The hourly sums are kept
# regardless.
LEDGER_RETENTION_DAYS = env_int("GPUCLOUD_LEDGER_RETENTION_DAYS", 400, minimum=0)


def _xids(name: str, default: list[str]) -> list[str]:
    """A comma-separated list of XID numbers; anything else stops the start, naming the setting."""
    values = env_list(name, default)
    bad = [v for v in values if not v.isdigit()]
    if bad:
        raise ConfigError(f"{name} must list XID numbers, got {', '.join(bad)}")
    return values


# GPU health (docs/health.md): the XID classes (NVIDIA's XID catalogue by default), what other signals count,
# how long a quarantined GPU or node must stay clean to come back (doubling for each recent quarantine),
# whether a quarantined node is drained, the cap on credits for lost time, and whom to tell.
HEALTH_XID_IGNORED = _xids(
    "GPUCLOUD_HEALTH_XID_IGNORED", ["13", "31", "43", "45", "63", "68", "69", "92", "94"]
)
HEALTH_XID_RESET = _xids(
    "GPUCLOUD_HEALTH_XID_RESET",
    ["46", "48", "62", "64", "95", "109", "110", "119", "120", "136", "140", "143", "155", "156", "158"],
)
HEALTH_XID_FATAL = _xids(
    "GPUCLOUD_HEALTH_XID_FATAL",
    ["61", "74", "79", "144", "145", "146", "147", "148", "149", "150", "151", "160"],
)
HEALTH_XID_UNKNOWN = env_choice("GPUCLOUD_HEALTH_XID_UNKNOWN", "warning", {"warning", "fatal"})
HEALTH_RETIRED_PAGES_LIMIT = env_int("GPUCLOUD_HEALTH_RETIRED_PAGES_LIMIT", 60, minimum=1)
HEALTH_NVLINK_ERRORS_PER_ROUND = env_int("GPUCLOUD_HEALTH_NVLINK_ERRORS_PER_ROUND", 100, minimum=1)
HEALTH_THROTTLE_SHARE = env_float("GPUCLOUD_HEALTH_THROTTLE_SHARE", 0.5, minimum=0.0)
HEALTH_NODE_CONDITIONS_FATAL = env_list(
    "GPUCLOUD_HEALTH_NODE_CONDITIONS_FATAL",
    [
        "KernelDeadlock",
        "ReadonlyFilesystem",
        "XfsShutdown",
        "GpuXidFatal",
        "XidCriticalError",
        "SysLogsGPUFallenOff",
        "SysLogsXIDError",
        "GpuMemWatch",
        "GpuNvlinkWatch",
    ],
)
HEALTH_EVENT_CLEAR_AFTER = env_float("GPUCLOUD_HEALTH_EVENT_CLEAR_AFTER", 300.0, minimum=0.0)
HEALTH_CLEAN_WINDOW = env_float("GPUCLOUD_HEALTH_CLEAN_WINDOW", 3600.0, minimum=0.0)
HEALTH_FLAP_WINDOW = env_float("GPUCLOUD_HEALTH_FLAP_WINDOW", 86400.0, minimum=0.0)
HEALTH_DRAIN = env_bool("GPUCLOUD_HEALTH_DRAIN", False)
HEALTH_CREDIT_MAX_HOURS = env_float("GPUCLOUD_HEALTH_CREDIT_MAX_HOURS", 24.0, minimum=0.0)
HEALTH_ALERT_SHARE = env_float("GPUCLOUD_HEALTH_ALERT_SHARE", 0.1, minimum=0.0)
HEALTH_ALERT_WEBHOOK_URL = env_str("GPUCLOUD_HEALTH_ALERT_WEBHOOK_URL", "")
HEALTH_ALERT_EMAILS = env_list("GPUCLOUD_HEALTH_ALERT_EMAILS", [])
HEALTH_PASS_INTERVAL = env_float("GPUCLOUD_HEALTH_PASS_INTERVAL", 60.0, minimum=1.0)

# GitOps (docs/gitops.md): how often sources are checked for being due, how long a fetch may take, and whether
# file:// repositories may be registered through the API (the console always may).
GITOPS_POLL_INTERVAL = env_float("GPUCLOUD_GITOPS_POLL_INTERVAL", 30.0, minimum=1.0)
GITOPS_FETCH_TIMEOUT = env_float("GPUCLOUD_GITOPS_FETCH_TIMEOUT", 60.0, minimum=1.0)
GITOPS_FILE_URLS = env_bool("GPUCLOUD_GITOPS_FILE_URLS", False)
# Where http(s) sources may point: public addresses, and these networks the operator allows (an internal git
# server); a PEM bundle git trusts for https (an internal CA). `gpucloud/outbound.py`, as budget webhooks.
GITOPS_ALLOWED_NETWORKS = env_networks("GPUCLOUD_GITOPS_ALLOWED_NETWORKS")
GITOPS_CA_FILE = env_str("GPUCLOUD_GITOPS_CA_FILE", "")
# What one sync may read and how long it may take: a commit over a limit is refused whole, naming the limit.
GITOPS_MAX_FILES = env_int("GPUCLOUD_GITOPS_MAX_FILES", 2000, minimum=1)
GITOPS_MAX_FILE_BYTES = env_int("GPUCLOUD_GITOPS_MAX_FILE_BYTES", 1_048_576, minimum=1)
GITOPS_MAX_COMMIT_BYTES = env_int("GPUCLOUD_GITOPS_MAX_COMMIT_BYTES", 16_777_216, minimum=1)
GITOPS_SYNC_TIMEOUT = env_float("GPUCLOUD_GITOPS_SYNC_TIMEOUT", 180.0, minimum=1.0)
# `manage.py watch_tenants` (Tenant and RateCard custom resources): a full list-and-apply pass this often;
# watches carry changes in between.
TENANT_RESOURCES_RESYNC = env_float("GPUCLOUD_TENANT_RESOURCES_RESYNC", 60.0, minimum=1.0)
# A GitOps webhook delivery is remembered this long (its delivery id and the digest of its signed body): the
# same delivery again within it is refused as a replay.
GITOPS_WEBHOOK_REPLAY_WINDOW = env_float("GPUCLOUD_GITOPS_WEBHOOK_REPLAY_WINDOW", 7 * 86400.0, minimum=60.0)

# The live view of Kubernetes host clusters (docs/placement.md): a pass every LIVE_PASS_INTERVAL seconds
# watches each cluster's pods for LIVE_WATCH_SECONDS, resuming where the last one stopped.
LIVE_PASS_INTERVAL = env_float("GPUCLOUD_LIVE_PASS_INTERVAL", 30.0, minimum=1.0)
LIVE_WATCH_SECONDS = env_int("GPUCLOUD_LIVE_WATCH_SECONDS", 25, minimum=1)

CELERY_BEAT_SCHEDULE = {
    "sync-gitops-sources": {"task": "gitops.sync_due_sources", "schedule": GITOPS_POLL_INTERVAL},
    "reconcile-all": {"task": "workers.reconcile_all", "schedule": RECONCILE_INTERVAL},
    "report-stuck-tenants": {"task": "workers.report_stuck_tenants", "schedule": 60.0},
    "collect-usage": {"task": "billing.collect_usage", "schedule": METER_INTERVAL},
    "check-budgets": {"task": "billing.check_budgets", "schedule": BUDGET_CHECK_INTERVAL},
    "maintain-ledger": {"task": "billing.maintain_ledger", "schedule": 6 * 3600.0},
    "check-idle": {"task": "billing.check_idle", "schedule": IDLE_CHECK_INTERVAL},
    "health-pass": {"task": "workers.health_pass_all", "schedule": HEALTH_PASS_INTERVAL},
    "live-pass": {"task": "placement.live_pass_all", "schedule": LIVE_PASS_INTERVAL},
}
if SIM_WORKLOADS:
    CELERY_BEAT_SCHEDULE["simulate-workloads"] = {
        "task": "workers.simulate_workloads",
        "schedule": SIM_WORKLOAD_INTERVAL,
    }

# --- Observability ---------------------------------------------------------------------------------------
LOG_LEVEL = env_str("LOG_LEVEL", "INFO").upper()
LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "filters": {"context": {"()": "gpucloud.observability.ContextFilter"}},
    "formatters": {
        "json": {
            "()": "pythonjsonlogger.json.JsonFormatter",
            "fmt": "%(asctime)s %(levelname)s %(name)s %(message)s",
            "rename_fields": {"asctime": "time", "levelname": "level", "name": "logger"},
        }
    },
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "json", "filters": ["context"]}},
    "root": {"handlers": ["console"], "level": LOG_LEVEL},
    "loggers": {"django.server": {"level": "WARNING"}, "aiohttp.access": {"level": "WARNING"}},
}
