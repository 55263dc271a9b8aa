// Package metrics exports a running query's progress as Prometheus metrics.
//
// A Metrics is an engine.Observer: pass it with engine.WithObserver (alone or
// beside others) and serve its Handler at /metrics. It registers on its own
// prometheus.Registry, never the global one, so that two queries in one process
// (tests, `lockstep run` twice) do not collide. Every metric carries the
// query's namespace and name as the labels namespace and query; the other
// labels are the source, operator, phase and store operation names, all
// bounded by the spec, and a Kafka partition's topic and number. No label
// holds a batch id or an offset.
//
// # Metrics
//
//	lockstep_query_info{query_id,guarantee,trigger}              1 once the run started
//	lockstep_batches_committed_total                             batches committed by this process
//	lockstep_batches_replayed_total                              of those, re-runs of a batch an earlier run planned
//	lockstep_last_committed_batch                                the newest committed batch id
//	lockstep_last_commit_timestamp_seconds                       the batch timestamp of that batch (Unix seconds)
//	lockstep_idle_triggers_total                                 triggers that found no new data
//	lockstep_input_rows_total{source}                            rows read
//	lockstep_malformed_rows_total{source}                        records skipped or dead-lettered (onMalformed)
//	lockstep_output_rows_total                                   rows handed to the sink
//	lockstep_batch_duration_seconds                              histogram: a batch from planning to commit
//	lockstep_batch_phase_duration_seconds{phase}                 histogram: a batch's time per phase
//	lockstep_source_lag_records{source}                          records beyond the batch's end offset when planned
//	lockstep_source_lag_seconds{source}                          age of the newest record read, where records remained (Kafka)
//	lockstep_source_partition_lag_records{source,topic,partition}  the same per Kafka partition
//	lockstep_source_partition_lag_seconds{source,topic,partition}  the same per Kafka partition
//	lockstep_watermark_seconds                                   the event-time watermark (Unix seconds; 0 = none)
//	lockstep_state_rows{operator}                                keys in the operator's state after the batch
//	lockstep_state_memory_bytes{operator}                        estimated memory of that state
//	lockstep_state_rows_dropped_by_watermark_total{operator}     late input rows dropped
//	lockstep_state_commit_duration_seconds{operator}             histogram: writing the batch's state files
//	lockstep_s3_retries_total{operation}                         S3 requests retried (checkpoint, sources, sink)
//	lockstep_s3_uncertain_writes_total                           creates with an unknown outcome, resolved by reading back
//	lockstep_checkpoint_operation_duration_seconds{operation}    histogram: operations on the checkpoint's store
//	lockstep_checkpoint_operation_retries_total{operation}       requests those operations retried
//	lockstep_checkpoint_operation_errors_total{operation}        those operations that failed
//
// The per-partition lag has one series per Kafka partition the source reads;
// docs/observability.md discusses that cardinality. Metrics.Catalog lists
// every metric, for tests that check dashboards and docs against it.
package metrics
