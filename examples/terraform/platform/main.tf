# A platform module: what a platform team gives each product team to run streaming queries.
# For every team in var.teams, the team module makes the team's namespace, its S3 credentials
# Secret and a CheckpointStore that only the team's namespace may use; the team-queries
# module runs the team's two queries with their checkpoints in the store.
#
#   terraform init
#   terraform apply -var s3_access_key_id=... -var s3_secret_access_key=...
#
# terraform.tfvars lists two teams; add a team there and apply. The team module uses the
# hashicorp/kubernetes provider: on a machine without registry access, put it in the same
# filesystem mirror as lockstep-dev/lockstep first (docs/terraform/guides/install.md, "Offline").
#
# A team's namespace and store are new in its first apply, so its queries' first plan cannot
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

variable "teams" {
  description = "The product teams, by name. A name is a DNS label: the team's namespace and the prefix of its CheckpointStore."
  type = map(object({
    landing    = string # s3:// folder where the team's order files land
    lake       = string # s3:// folder where the team's cleaned data goes
    alerts_url = string # URL that receives the team's big orders as they arrive
  }))
}

variable "bucket" {
  type        = string
  description = "The S3 bucket that holds every team's checkpoints, under <team>/<query>."
  default     = "lockstep-checkpoints"
}

variable "s3_endpoint" {
  type        = string
  description = "http(s)://host:port of the S3 or MinIO endpoint; null for AWS."
  default     = "https://minio.storage.svc:9000"
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

module "team" {
  source   = "./modules/team"
  for_each = var.teams

  team                 = each.key
  bucket               = var.bucket
  s3_endpoint          = var.s3_endpoint
  s3_access_key_id     = var.s3_access_key_id
  s3_secret_access_key = var.s3_secret_access_key
}

module "queries" {
  source   = "./modules/team-queries"
  for_each = var.teams

  namespace        = module.team[each.key].namespace
  checkpoint_store = module.team[each.key].checkpoint_store
  landing          = each.value.landing
  lake             = each.value.lake
  alerts_url       = each.value.alerts_url

  # The engines and the webhook read the checkpoints with the team's Secret.
  depends_on = [module.team]
}

output "queries" {
  description = "By team, each query's checkpoint location and delivery guarantee."
  value       = { for team, q in module.queries : team => q.queries }
}
