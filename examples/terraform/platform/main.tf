# A platform module: what a platform team gives each product team to run streaming queries.
# The team module makes the team's namespace, its S3 credentials Secret and a CheckpointStore
# that only the team's namespace may use; the team-queries module runs the team's two queries
# with their checkpoints in the store.
#
#   terraform init
#   terraform apply -var s3_access_key_id=... -var s3_secret_access_key=...
#
# The namespace and the store are new in the first apply, so the queries' first plan cannot
# ask the cluster about them yet; the admission webhook checks them when they are created.
# Every later plan asks it, against each query's checkpoint.

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

variable "kubeconfig" {
  type    = string
  default = "~/.kube/config"
}

variable "s3_access_key_id" {
  type      = string
  sensitive = true
}

variable "s3_secret_access_key" {
  type      = string
  sensitive = true
}

provider "kubernetes" {
  config_path = var.kubeconfig
}

provider "lockstep" {
  kubeconfig_path = var.kubeconfig
}

module "payments" {
  source = "./modules/team"

  team                 = "payments"
  bucket               = "lockstep-checkpoints"
  s3_endpoint          = "https://minio.storage.svc:9000"
  s3_access_key_id     = var.s3_access_key_id
  s3_secret_access_key = var.s3_secret_access_key
}

module "payments_queries" {
  source = "./modules/team-queries"

  namespace        = module.payments.namespace
  checkpoint_store = module.payments.checkpoint_store
  landing          = "s3://landing/payments"
  lake             = "s3://lake/payments"
  alerts_url       = "https://alerts.payments.example.com/hooks/big-orders"

  # The engines and the webhook read the checkpoints with the team's Secret.
  depends_on = [module.payments]
}

output "payments" {
  value = module.payments_queries.queries
}
