# The team's queries, on the namespace and CheckpointStore that the team module makes. Kept in
# a module of their own so that they can be planned and applied with the lockstep provider
# alone (the provider's tests do, against a real cluster).

locals {
  orders_schema = {
    columns = [
      { name = "order_id", type = "string" },
      { name = "country", type = "string" },
      { name = "amount", type = "double" },
      { name = "ts", type = "timestamp" },
    ]
  }
}

# Orders, cleaned, into the lake as Parquet: exactly-once.
resource "lockstep_streaming_query" "orders_clean" {
  namespace = var.namespace
  name      = "orders-clean"

  sources = [{
    name         = "orders"
    files        = { path = "${var.landing}/orders/", format = "json", max_files_per_trigger = 100 }
    schema       = local.orders_schema
    on_malformed = "skip"
  }]
  transform = [
    { filter = "amount > 0.0" },
    {
      select = [
        { name = "order_id", expr = "order_id" },
        { name = "country", expr = "country.upperAscii()" },
        { name = "amount", expr = "amount" },
        { name = "ts", expr = "ts" },
      ]
    },
  ]
  sink       = { files = { path = "${var.lake}/orders-clean/", format = "parquet" } }
  trigger    = { processing_time = "1m" }
  checkpoint = { store = var.checkpoint_store }
}

# Big orders, posted to the alerting service as they arrive: at-least-once, de-duplicated by
# the receiver with the Idempotency-Key header.
resource "lockstep_streaming_query" "big_orders" {
  namespace = var.namespace
  name      = "big-orders"

  sources = [{
    name   = "orders"
    files  = { path = "${var.landing}/orders/", format = "json" }
    schema = local.orders_schema
  }]
  transform = [{ filter = "amount >= 10000.0" }]
  sink = {
    webhook = {
      url                  = var.alerts_url
      max_rows_per_request = 100
      timeout              = "10s"
    }
  }
  checkpoint = { store = var.checkpoint_store }
}
