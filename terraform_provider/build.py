"""`make terraform-provider`: the provider as a local filesystem mirror, and the CLI configuration using it.

    python -m terraform_provider.build [OUT]      (OUT defaults to var/terraform)

writes OUT/bin/terraform-provider-gpucloud (a launcher whose shebang is this Python, which has the provider's
dependencies), OUT/mirror/gpucloud.io/gpucloud/gpucloud/… (tf.runner.install_provider's layout) and
OUT/cli.tfrc, then prints `export TF_CLI_CONFIG_FILE=OUT/cli.tfrc`.
"""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

from tf.runner import install_provider

from terraform_provider import ADDRESS, VERSION

ROOT = Path(__file__).resolve().parent.parent

LAUNCHER = """#!{python}
# terraform-provider-gpucloud {version}: runs terraform_provider from {root}
import sys

sys.path.insert(0, {root!r})
from terraform_provider.provider import main

main()
"""

CLI_CONFIG = """# By `make terraform-provider`: gpucloud's provider from the local mirror, the rest as usual.
provider_installation {{
  filesystem_mirror {{
    path    = "{mirror}"
    include = ["{host}/*/*"]
  }}
  direct {{
    exclude = ["{host}/*/*"]
  }}
}}
"""


def build(out: Path) -> Path:
    """Build the mirror and the CLI configuration under `out`; returns the configuration's path."""
    out = out.resolve()
    host, namespace, project = ADDRESS.split("/")
    launcher = out / "bin" / f"terraform-provider-{project}"
    launcher.parent.mkdir(parents=True, exist_ok=True)
    launcher.write_text(LAUNCHER.format(python=sys.executable, version=VERSION, root=str(ROOT)))
    launcher.chmod(0o755)
    mirror = out / "mirror"
    shutil.rmtree(mirror, ignore_errors=True)  # a rebuilt launcher must not sit beside a stale archive
    install_provider(host, namespace, project, VERSION, mirror, launcher)
    config = out / "cli.tfrc"
    config.write_text(CLI_CONFIG.format(mirror=mirror, host=host))
    return config


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "var" / "terraform"
    print(f"export TF_CLI_CONFIG_FILE={build(target)}")
