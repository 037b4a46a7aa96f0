"""The Terraform provider `gpucloud.io/gpucloud/gpucloud`, written with the `tf` framework.

It talks to gpucloud's REST API over HTTP only (requests) and imports nothing of the product: it runs on a
platform team's machine, not on the server. `make terraform-provider` builds it into a filesystem mirror.
"""

ADDRESS = "gpucloud.io/gpucloud/gpucloud"
VERSION = "0.1.0"
