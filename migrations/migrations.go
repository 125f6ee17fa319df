// Package migrations holds the SQL migrations of the shop database, embedded
// in the binary so `shop migrate` and `shop serve` need no files beside them.
//
// Files are goose migrations: NNNNN_name.sql with `-- +goose Up` and
// `-- +goose Down` sections. Never edit a migration that has been released;
// add a new one.
package migrations

import "embed"

// FS is the embedded migration files.
//
//go:embed *.sql
var FS embed.FS
