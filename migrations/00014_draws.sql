-- +goose Up
-- A sale round may be a draw (docs/design/draws.md): shoppers enter with
-- their payment authorised, and at the close the units go to entrants
-- ranked from the committed seed. The seed is fixed when the round is
-- seeded; draw_state is the draw's progress (open, closed: drawing,
-- drawn), moved forward only, by one UPDATE ... WHERE draw_state = <from>.
ALTER TABLE sale_rounds
    ADD COLUMN draw_closes_at      timestamptz,
    ADD COLUMN draw_seed           text,
    ADD COLUMN draw_state          text CHECK (draw_state IN ('open', 'closed', 'drawn')),
    ADD COLUMN draw_winners_sha256 text,
    ADD CONSTRAINT sale_rounds_draw_whole CHECK (
        (draw_closes_at IS NULL) = (draw_seed IS NULL) AND
        (draw_closes_at IS NULL) = (draw_state IS NULL)),
    -- A draw sells nothing first come, first served: no room to queue for.
    ADD CONSTRAINT sale_rounds_draw_no_room CHECK (draw_closes_at IS NULL OR room_admit_per_second IS NULL);

-- Open draws, for the runner that closes them when their time comes.
CREATE INDEX sale_rounds_draws_due ON sale_rounds (draw_closes_at) WHERE draw_state IN ('open', 'closed');

-- One row per entry. Every state change is one UPDATE ... WHERE state =
-- <from>, so two instances cannot both move an entry. user_id has no
-- foreign key, like queue_entries: the list is the draw's history.
CREATE TABLE draw_entries (
    id             uuid        PRIMARY KEY,
    round_id       bigint      NOT NULL REFERENCES sale_rounds (id),
    user_id        uuid        NOT NULL,
    quantity       integer     NOT NULL CHECK (quantity >= 1),
    state          text        NOT NULL
        CHECK (state IN ('authorizing', 'entered', 'won', 'lost', 'withdrawn', 'failed')),
    amount_cents   bigint      NOT NULL CHECK (amount_cents >= 0),
    provider       text        NOT NULL,
    -- The provider's authorisation ('' until it answered) and its status
    -- as the provider last said it.
    payment_id     text        NOT NULL DEFAULT '',
    payment_status text        NOT NULL DEFAULT '',
    client_secret  text        NOT NULL DEFAULT '',
    -- The request's Idempotency-Key and what it asked (a repeat with
    -- another request is refused).
    idem_key       text,
    fingerprint    text        NOT NULL,
    -- Set by the draw: the place in the seed's order, and the units this
    -- rank gets if every capture above it succeeds.
    rank           integer     CHECK (rank >= 1),
    won_units      integer     NOT NULL DEFAULT 0 CHECK (won_units >= 0 AND won_units <= quantity),
    captured_cents bigint      NOT NULL DEFAULT 0 CHECK (captured_cents >= 0 AND captured_cents <= amount_cents),
    cancelled_at   timestamptz,
    order_id       uuid,
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (round_id, rank),
    CHECK (state <> 'won' OR (order_id IS NOT NULL AND won_units > 0))
);
-- One live entry per shopper and round: two requests racing with two
-- keys cannot both enter.
CREATE UNIQUE INDEX draw_entries_one_per_shopper ON draw_entries (round_id, user_id)
    WHERE state IN ('authorizing', 'entered', 'won');
CREATE UNIQUE INDEX draw_entries_idem ON draw_entries (user_id, idem_key) WHERE idem_key IS NOT NULL;
CREATE INDEX draw_entries_round ON draw_entries (round_id, created_at, id);
CREATE INDEX draw_entries_user ON draw_entries (user_id, round_id);

-- +goose Down
DROP TABLE draw_entries;
DROP INDEX sale_rounds_draws_due;
ALTER TABLE sale_rounds
    DROP CONSTRAINT sale_rounds_draw_no_room,
    DROP CONSTRAINT sale_rounds_draw_whole,
    DROP COLUMN draw_winners_sha256,
    DROP COLUMN draw_state,
    DROP COLUMN draw_seed,
    DROP COLUMN draw_closes_at;
