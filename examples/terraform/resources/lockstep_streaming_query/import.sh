# A query is imported by namespace/name (or by name, in the provider's namespace).
terraform import lockstep_streaming_query.orders_clean payments/orders-clean
