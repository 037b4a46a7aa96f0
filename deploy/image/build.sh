#!/usr/bin/env bash
# The image's build steps, in one place: deploy/image/Dockerfile runs this, and gpucloud/tests/test_image.py
# runs it in a clean virtualenv, so what the image does at build time is tested here without a registry.
#
#   build.sh SRC PREFIX
#
# Builds the wheel from the sources in SRC, installs it with its runtime dependencies (no dev extras) into a
# new virtualenv at PREFIX, collects the static files into $GPUCLOUD_VAR_DIR/static (WhiteNoise serves them
# from there), and runs `manage.py check --deploy` with production settings, failing on any warning.
set -euo pipefail
src=$(cd "$1" && pwd)
prefix=$2
: "${GPUCLOUD_VAR_DIR:?set GPUCLOUD_VAR_DIR to the directory the image keeps its static files under}"
python=${PYTHON:-python3}

dist=$(mktemp -d)
trap 'rm -rf "$dist"' EXIT
"$python" -m venv "$prefix"
"$prefix/bin/pip" wheel --no-cache-dir --disable-pip-version-check -q --no-deps -w "$dist" "$src"
"$prefix/bin/pip" install --no-cache-dir --disable-pip-version-check -q "$dist"/gpucloud-*.whl

# Production settings (a PostgreSQL DATABASE_URL, Redis, HTTPS on) with throwaway secrets: nothing here is
# kept in the image, and no database or broker is reached at build time.
secret() { "$prefix/bin/python" -c 'import secrets; print(secrets.token_urlsafe(50))'; }
fernet() { "$prefix/bin/python" -c 'from cryptography.fernet import Fernet; print(Fernet.generate_key().decode())'; }
production=(
  env -u DEBUG -u GPUCLOUD_HTTPS -u PYTHONPATH
  DJANGO_SETTINGS_MODULE=gpucloud.settings
  DATABASE_URL=postgres://gpucloud@postgres.invalid:5432/gpucloud
  CELERY_BROKER_URL=redis://redis.invalid:6379/0
  SECRET_KEY="$(secret)"
  GPUCLOUD_ENCRYPTION_KEYS="$(fernet)"
  ALLOWED_HOSTS=gpucloud.example.com
)
cd "$dist"  # not the sources: the installed package must stand on its own
"${production[@]}" "$prefix/bin/gpucloud" manage collectstatic --noinput -v0
"${production[@]}" "$prefix/bin/gpucloud" manage check --deploy --fail-level WARNING
