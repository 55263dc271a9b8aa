terraform {
  required_providers {
    kubernetes = {
      source  = "hashicorp/kubernetes"
      version = ">= 2.23"
    }
    lockstep = {
      source = "lockstep-dev/lockstep"
    }
  }
}
