output "queries" {
  description = "Each query's checkpoint location and delivery guarantee."
  value = {
    for q in [lockstep_streaming_query.orders_clean, lockstep_streaming_query.big_orders] :
    q.name => {
      checkpoint = q.checkpoint_location
      guarantee  = q.delivery_guarantee
    }
  }
}
