# Read a query that another team runs, and alert on its lag.
data "lockstep_streaming_query" "orders" {
  namespace = "payments"
  name      = "orders-clean"
}

output "orders_progress" {
  value = {
    phase                  = data.lockstep_streaming_query.orders.phase
    latest_committed_batch = data.lockstep_streaming_query.orders.latest_committed_batch
    lag                    = data.lockstep_streaming_query.orders.status.lag
    guarantee              = data.lockstep_streaming_query.orders.delivery_guarantee
  }
}
