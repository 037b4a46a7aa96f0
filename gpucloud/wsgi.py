import os

from django.conf import settings
from django.core.wsgi import get_wsgi_application
from django.utils.module_loading import import_string

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "gpucloud.settings")
application = get_wsgi_application()

# Start-up work is named in settings (WSGI_STARTUP), so the base layer imports no domain app.
for hook in settings.WSGI_STARTUP:
    import_string(hook)()
