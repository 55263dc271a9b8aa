# The quickstart: one streaming query on a cluster that runs the Lockstep controller.
#
#   terraform init
#   terraform apply -var checkpoint_store=team-checkpoints
#
# A rate source makes 10 rows a second (timestamp, value); the query keeps the even values,
# computes a label and prints every batch to the engine pod's log. Its checkpoint goes where
# the CheckpointStore puts it. Change the filter and plan again: the plan asks the cluster
# whether the query's checkpoint allows the change.

terraform {
  required_providers {
    lockstep = {
      source = "lockstep-dev/lockstep"
    }
  }
}

variable "kubeconfig" {
  type        = string
  description = "Path of the kubeconfig file; null uses KUBECONFIG, then ~/.kube/config."
  default     = null
}

variable "namespace" {
  type        = string
  description = "Namespace of the query; it must be allowed to use the CheckpointStore."
  default     = "default"
}

variable "checkpoint_store" {
  type        = string
  description = "Name of the CheckpointStore (kubectl get checkpointstores) that holds the checkpoint."
}

provider "lockstep" {
  kubeconfig_path = var.kubeconfig
  namespace       = var.namespace
}

resource "lockstep_streaming_query" "quickstart" {
  name = "quickstart"

  sources = [{
    name = "ticks"
    rate = { rows_per_second = 10 }
  }]

  transform = [
    { filter = "value % 2 == 0" },
    {
      select = [
        { name = "at", expr = "timestamp" },
        { name = "value", expr = "value" },
        { name = "label", expr = "'tick-' + string(value)" },
      ]
    },
  ]

  sink    = { console = {} }
  trigger = { processing_time = "2s" }

  checkpoint = { store = var.checkpoint_store }
}

output "checkpoint_location" {
  description = "Where the query's checkpoint is."
  value       = lockstep_streaming_query.quickstart.checkpoint_location
}

output "delivery_guarantee" {
  description = "The console sink keeps nothing: none."
  value       = "${lockstep_streaming_query.quickstart.delivery_guarantee}: ${lockstep_streaming_query.quickstart.delivery_guarantee_reason}"
}
