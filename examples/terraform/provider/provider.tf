terraform {
  required_providers {
    lockstep = {
      source = "lockstep-dev/lockstep"
    }
  }
}

# From a kubeconfig file and context. Omit both to use KUBECONFIG, then ~/.kube/config,
# then the service account of the pod Terraform runs in.
provider "lockstep" {
  kubeconfig_path    = "~/.kube/config"
  kubeconfig_context = "platform-prod"
  namespace          = "payments" # for queries that name none
}

# Or from explicit connection settings, for example those a cluster resource exports.
provider "lockstep" {
  alias                  = "explicit"
  host                   = "https://10.0.0.1:6443"
  token                  = var.cluster_token
  cluster_ca_certificate = var.cluster_ca_certificate
}

variable "cluster_token" {
  type      = string
  sensitive = true
}

variable "cluster_ca_certificate" {
  type        = string
  description = "PEM bundle of the CAs that sign the API server's certificate."
}
