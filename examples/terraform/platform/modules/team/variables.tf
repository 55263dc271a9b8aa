variable "team" {
  type        = string
  description = "The team's name: its namespace and the prefix of its CheckpointStore."
  validation {
    condition     = can(regex("^[a-z0-9]([-a-z0-9]*[a-z0-9])?$", var.team))
    error_message = "The team's name must be a DNS label."
  }
}

variable "bucket" {
  type        = string
  description = "The S3 bucket that holds the team's checkpoints, under <team>/<query>."
}

variable "s3_endpoint" {
  type        = string
  description = "http(s)://host:port of the S3 or MinIO endpoint; null for AWS."
  default     = null
}

variable "s3_region" {
  type    = string
  default = "us-east-1"
}

variable "s3_access_key_id" {
  type      = string
  sensitive = true
}

variable "s3_secret_access_key" {
  type      = string
  sensitive = true
}
