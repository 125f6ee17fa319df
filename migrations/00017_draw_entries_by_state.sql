-- +goose Up
-- The draw's reads by state (internal/draw/run.go), each of a few rows of
-- a draw that may hold 100,000: before each capture, the entered entries
-- in rank order (the next winner, the allocation's top ranks) and the
-- won entries' units; after the captures, the holds left to cancel, in
-- rank order. Without them each read scans the whole draw: a draw of
-- 100,000 entries captured 6 winners a second (BENCHMARKS.md "Draws").
CREATE INDEX draw_entries_entered ON draw_entries (round_id, rank) WHERE state = 'entered';
CREATE INDEX draw_entries_won ON draw_entries (round_id) INCLUDE (won_units) WHERE state = 'won';
CREATE INDEX draw_entries_to_cancel ON draw_entries (round_id, rank, created_at, id)
    WHERE state IN ('lost', 'withdrawn', 'failed') AND payment_id <> '' AND cancelled_at IS NULL;

-- +goose Down
DROP INDEX draw_entries_to_cancel;
DROP INDEX draw_entries_won;
DROP INDEX draw_entries_entered;
