-- +goose Up
-- A rank is set only at the close, yet UNIQUE (round_id, rank) indexed
-- every entry's NULL rank before it, twice (the entry's row, then its
-- authorisation, which moves the row). A partial unique index keeps the
-- rule for the ranks given and indexes nothing before: one less index
-- write per entry row, on the path that sets entries per second.
CREATE UNIQUE INDEX draw_entries_rank ON draw_entries (round_id, rank) WHERE rank IS NOT NULL;
ALTER TABLE draw_entries DROP CONSTRAINT draw_entries_round_id_rank_key;

-- +goose Down
ALTER TABLE draw_entries ADD CONSTRAINT draw_entries_round_id_rank_key UNIQUE (round_id, rank);
DROP INDEX draw_entries_rank;
