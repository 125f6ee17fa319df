-- +goose Up
-- The most units each stock bucket of a round had been given back, as
-- its persisted order lines saw them (docs/design/buckets.md, "Each
-- bucket's equation"). On a cluster each bucket counts the releases it
-- took and those its moves brought, so a round may sell its quantity
-- plus their sum: the writer raises sale_rounds.released_seen to it in
-- the transaction that adds the sold units, before the CHECK.
CREATE TABLE sale_round_bucket_released (
    round_id      bigint   NOT NULL REFERENCES sale_rounds (id) ON DELETE CASCADE,
    bucket        smallint NOT NULL CHECK (bucket BETWEEN 0 AND 63),
    released_seen bigint   NOT NULL CHECK (released_seen >= 0),
    PRIMARY KEY (round_id, bucket)
);

-- +goose Down
DROP TABLE sale_round_bucket_released;
