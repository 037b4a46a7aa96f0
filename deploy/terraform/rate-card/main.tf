# The platform's prices: a rate card applies to every tenant's usage from `effective_from` on, so it is a
# platform administrator's configuration of its own, never part of a tenant's (../example/). Run it like the
# tenant example, from a working copy under var/ (README.md, "Terraform"); docs/terraform.md says what an
# apply, a change (a new version) and `terraform destroy` do to a card.

terraform {
  required_providers {
    gpucloud = {
      source  = "gpucloud.io/gpucloud/gpucloud"
      version = "~> 0.1"
    }
  }
}

# endpoint and token come from GPUCLOUD_ENDPOINT and GPUCLOUD_TOKEN (a platform administrator's token).
provider "gpucloud" {}

resource "gpucloud_rate_card" "standard" {
  effective_from = "2026-01-01T00:00:00Z"
  prices         = { "h200-141gb" = 4.5 }
}

output "version" {
  value = gpucloud_rate_card.standard.version
}
