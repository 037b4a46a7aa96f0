import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
application = get_wsgi_application()

# Read the OpenID provider's discovery document now, in the background, so a misconfigured or unreachable
# provider is in the log at start-up rather than at the first sign-in (which retries it anyway).
from tenants.sso import warm_up  # noqa: E402

warm_up()
