# The product teams that get a namespace, a CheckpointStore and their queries. Terraform reads
# this file on its own; add a team here and apply.
teams = {
  payments = {
    landing    = "s3://landing/payments"
    lake       = "s3://lake/payments"
    alerts_url = "https://alerts.payments.example.com/hooks/big-orders"
  }
  shipping = {
    landing    = "s3://landing/shipping"
    lake       = "s3://lake/shipping"
    alerts_url = "https://alerts.shipping.example.com/hooks/big-orders"
  }
}
