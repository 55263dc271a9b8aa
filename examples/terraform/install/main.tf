# The smallest configuration that installs and runs the provider: terraform init finds
# lockstep-dev/lockstep in the local mirror (see docs/terraform/guides/install.md), and
# terraform plan reads a CheckpointStore with it.
terraform {
  required_providers {
    lockstep = {
      source = "lockstep-dev/lockstep"
    }
  }
}

variable "kubeconfig" {
  type    = string
  default = "~/.kube/config"
}

variable "checkpoint_store" {
  type        = string
  description = "Name of a CheckpointStore (kubectl get checkpointstores)."
}

provider "lockstep" {
  kubeconfig_path = var.kubeconfig
}

data "lockstep_checkpoint_store" "team" {
  name = var.checkpoint_store
}

output "bucket" {
  value = data.lockstep_checkpoint_store.team.s3.bucket
}
