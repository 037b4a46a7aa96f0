# A tenant as code: gpucloud's Terraform provider, installed from the local mirror `make terraform-provider`
# builds. README.md ("Terraform") says how to run it — from a working copy under var/, so the state (which holds
# the service token) and the kubeconfig stay out of the repository; terraform_provider/tests/ runs it against a
# live server. Prices are the platform's, in ../rate-card/, not part of a tenant.

terraform {
  required_providers {
    gpucloud = {
      source  = "gpucloud.io/gpucloud/gpucloud"
      version = "~> 0.1"
    }
  }
}

# endpoint and token come from GPUCLOUD_ENDPOINT and GPUCLOUD_TOKEN (a platform administrator's token:
# creating tenants, setting quotas and rate cards needs one).
provider "gpucloud" {}

variable "slug" {
  type    = string
  default = "vision"
}

variable "display_name" {
  type    = string
  default = "Vision Team"
}

variable "h200_guaranteed" {
  type    = number
  default = 8
}

variable "member" {
  description = "a user who has signed in once (a username)"
  type        = string
  default     = "alice"
}

variable "member_role" {
  type    = string
  default = "owner"
}

variable "token_name" {
  type    = string
  default = "ci"
}

data "gpucloud_gpu_class" "h200" {
  name = "h200-141gb"
}

resource "gpucloud_tenant" "vision" {
  slug           = var.slug
  display_name   = var.display_name
  trust_tier     = "standard"
  create_timeout = "5m" # apply waits until the tenant cluster is ready, and fails with the tenant's reason
}

resource "gpucloud_quota" "vision_h200" {
  tenant     = gpucloud_tenant.vision.slug
  gpu_class  = data.gpucloud_gpu_class.h200.name
  guaranteed = var.h200_guaranteed
  burst      = 8
}

resource "gpucloud_member" "member" {
  tenant = gpucloud_tenant.vision.slug
  user   = var.member
  role   = var.member_role
}

resource "gpucloud_service_token" "ci" {
  tenant = gpucloud_tenant.vision.slug
  name   = var.token_name
  scope  = "write"
}

data "gpucloud_kubeconfig" "vision" {
  tenant = gpucloud_tenant.vision.slug
}

output "endpoint" {
  value = gpucloud_tenant.vision.endpoint
}

output "kubeconfig" {
  value     = data.gpucloud_kubeconfig.vision.kubeconfig
  sensitive = true
}

output "ci_token" {
  value     = gpucloud_service_token.ci.token
  sensitive = true
}
