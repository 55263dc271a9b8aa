variable "namespace" {
  type        = string
  description = "The team's namespace."
}

variable "checkpoint_store" {
  type        = string
  description = "The CheckpointStore that keeps the queries' checkpoints."
}

variable "landing" {
  type        = string
  description = "s3:// folder where the team's order files land."
}

variable "lake" {
  type        = string
  description = "s3:// folder where the team's cleaned data goes."
}

variable "alerts_url" {
  type        = string
  description = "URL that receives big orders as they arrive."
}
