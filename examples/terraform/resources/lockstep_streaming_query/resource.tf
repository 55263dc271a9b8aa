# Orders from JSON files in S3, cleaned and written as Parquet, exactly once. The checkpoint
# goes where the namespace's CheckpointStore puts it.
resource "lockstep_streaming_query" "orders_clean" {
  namespace = "payments"
  name      = "orders-clean"

  sources = [{
    name  = "orders"
    files = { path = "s3://landing/orders/", format = "json", max_files_per_trigger = 100 }
    schema = {
      columns = [
        { name = "order_id", type = "string" },
        { name = "country", type = "string" },
        { name = "amount", type = "double" },
        { name = "ts", type = "timestamp" },
      ]
    }
    on_malformed = "skip"
  }]

  transform = [
    { filter = "amount > 0.0" },
    {
      select = [
        { name = "order_id", expr = "order_id" },
        { name = "country", expr = "country.upperAscii()" },
        { name = "cents", expr = "int(amount * 100.0)" },
        { name = "ts", expr = "ts" },
      ]
    },
  ]

  sink    = { files = { path = "s3://lake/orders-clean/", format = "parquet" } }
  trigger = { processing_time = "1m" }

  checkpoint = { store = "team-checkpoints" }

  # Apply returns once the controller reports the query Running.
  wait_for = "running"
  timeouts = { create = "5m", update = "5m" }
}

output "orders_clean" {
  value = {
    checkpoint = lockstep_streaming_query.orders_clean.checkpoint_location
    guarantee  = lockstep_streaming_query.orders_clean.delivery_guarantee
    query_id   = lockstep_streaming_query.orders_clean.query_id
  }
}
