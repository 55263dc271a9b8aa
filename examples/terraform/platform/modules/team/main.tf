resource "kubernetes_namespace_v1" "team" {
  metadata {
    name   = var.team
    labels = { "lockstep.dev/team" = var.team }
  }
}

# The engine pods and the admission webhook read the checkpoint with these credentials.
resource "kubernetes_secret_v1" "s3" {
  metadata {
    name      = "lockstep-s3"
    namespace = kubernetes_namespace_v1.team.metadata[0].name
  }
  data = {
    AWS_ACCESS_KEY_ID     = var.s3_access_key_id
    AWS_SECRET_ACCESS_KEY = var.s3_secret_access_key
  }
}

# A store only the team's namespace may use; each query's checkpoint goes to
# s3://<bucket>/<team>/<query>.
resource "kubernetes_manifest" "store" {
  manifest = {
    apiVersion = "streaming.lockstep.dev/v1"
    kind       = "CheckpointStore"
    metadata   = { name = "${var.team}-checkpoints" }
    spec = {
      s3                    = { endpoint = var.s3_endpoint, bucket = var.bucket, region = var.s3_region }
      credentialsSecretName = kubernetes_secret_v1.s3.metadata[0].name
      locationTemplate      = "{{namespace}}/{{name}}"
      allowedNamespaces     = [kubernetes_namespace_v1.team.metadata[0].name]
    }
  }
}

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
  namespace = kubernetes_namespace_v1.team.metadata[0].name
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
  checkpoint = { store = kubernetes_manifest.store.manifest.metadata.name }

  depends_on = [kubernetes_secret_v1.s3]
}

# Big orders, posted to the alerting service as they arrive: at-least-once, de-duplicated by
# the receiver with the Idempotency-Key header.
resource "lockstep_streaming_query" "big_orders" {
  namespace = kubernetes_namespace_v1.team.metadata[0].name
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
  checkpoint = { store = kubernetes_manifest.store.manifest.metadata.name }

  depends_on = [kubernetes_secret_v1.s3]
}
