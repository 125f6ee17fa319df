// Package writer is the order writer: the consumer-group worker that
// persists the order stream (package order's partitions, keys and entry
// format) to PostgreSQL exactly once. It owns reading and validating the
// stream's entries (ParseEntry), the batch transaction, the
// acknowledgements and dead letters, the after-commit and
// after-transition hooks (Persisted, Transition), and the stream's
// housekeeping (trimming, forgetting idle consumers, metrics).
//
// The reasoning behind it is in docs/design/writer.md.
package writer
