from importlib.metadata import PackageNotFoundError, version

# The version is written once, in pyproject.toml; the installed package's metadata carries it here (the API
# schema and `gpucloud --version` show it). An editable install learns a new one when reinstalled, which
# `make` does whenever pyproject.toml changes.
try:
    __version__ = version("gpucloud")
except PackageNotFoundError:  # the sources on sys.path without an install
    __version__ = "0+unknown"

from gpucloud.celery import app as celery_app

__all__ = ["__version__", "celery_app"]
