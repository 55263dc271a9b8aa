# Where the platform's store puts the checkpoint of payments/orders-clean.
data "lockstep_checkpoint_store" "team" {
  name            = "team-checkpoints"
  query_namespace = "payments"
  query_name      = "orders-clean"
}

output "checkpoint" {
  value = {
    bucket   = data.lockstep_checkpoint_store.team.s3.bucket
    location = data.lockstep_checkpoint_store.team.location
    ready    = data.lockstep_checkpoint_store.team.ready
  }
}
