// Package webhook holds the engine's webhook sink: it POSTs each batch as
// JSON to a URL. It is the engine's foreachBatch, and the place where the
// guarantee honestly drops to at-least-once.
//
// Nothing registers itself: a program registers it,
//
//	reg.RegisterSink(v1.SinkWebhook, webhook.SinkSpec(), webhook.NewSink)
//
// # Requests
//
// A batch with rows is sent in chunks of at most maxRowsPerRequest rows, one
// POST each, in order:
//
//	POST <url>
//	Content-Type: application/json
//	Idempotency-Key: <query id>:<batch id>            (one chunk)
//	Idempotency-Key: <query id>:<batch id>:<chunk>    (several chunks, from 0)
//
//	{"queryId":"…","batchId":7,"chunk":0,"chunks":1,"rows":[{"col":value,…},…]}
//
// Rows are objects with the output columns in order; timestamps are RFC 3339
// strings, nulls and non-finite doubles are null. A batch without rows sends
// nothing. The spec's headers are added to every request, and so are the
// headers of headersSecretName, read from a folder where the Secret is
// mounted (one file per header; see WithHeadersDir).
//
// # Failures and the guarantee
//
// A connection error, a timeout, 408, 429 (honouring Retry-After) or a 5xx
// answer is retried with exponential backoff (from 200ms to 10s) for up to
// two minutes by default (WithRetryFor); then the batch fails and the next run
// replays it. Any other 4xx answer fails at once with the status and the start
// of the body: the receiver refused the batch and a retry would not help.
//
// Delivery is at-least-once: a chunk may arrive twice — a retry after a
// timeout whose request did arrive, or a batch replayed after a crash — and
// always with the same Idempotency-Key. The receiver must remember the keys it
// accepted (keys of a query are increasing batch ids, so the highest batch id
// per query and chunk suffices) and acknowledge a repeated key without acting
// on it again.
package webhook
