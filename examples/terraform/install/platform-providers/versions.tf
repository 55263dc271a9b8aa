# The providers of examples/terraform/platform other than lockstep-dev/lockstep, for
# `terraform providers mirror`, which downloads every provider a configuration requires from
# its registry and would fail on lockstep-dev/lockstep, which is on none. On a machine with
# registry access:
#
#   terraform -chdir=examples/terraform/install/platform-providers providers mirror ~/.terraform.d/plugins
#
# The version constraint is the platform's team module's (a test keeps them equal).
terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.23"
    }
  }
}
