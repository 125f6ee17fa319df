-- +goose Up
-- How many stock buckets a round's units were split over in Redis
-- (docs/design/buckets.md); 1 for every round of before.
ALTER TABLE sale_rounds ADD COLUMN buckets smallint NOT NULL DEFAULT 1
    CHECK (buckets BETWEEN 1 AND 64);

-- +goose Down
ALTER TABLE sale_rounds DROP COLUMN buckets;
