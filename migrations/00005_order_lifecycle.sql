-- +goose Up
-- The order lifecycle: confirmed → paid, cancelled or expired.
--
-- expires_at is fixed when the order is accepted (the order event carries
-- it); NULL when the accepting instance had no payment window.
ALTER TABLE orders ADD COLUMN expires_at timestamptz;

-- One row per order that left "confirmed": its final state, recorded by the
-- order writer from the transition event the lifecycle step added to the
-- order stream in the same atomic Redis step. The primary key makes the
-- record idempotent (a redelivered event inserts nothing) and keeps the
-- first final state should two ever disagree. No foreign key to orders: a
-- pending order cancelled before its row was written is recorded all the
-- same, whichever writer gets to it first.
CREATE TABLE order_transitions (
    order_id    uuid        PRIMARY KEY,
    status      text        NOT NULL CHECK (status IN ('paid', 'cancelled', 'expired')),
    at          timestamptz NOT NULL,
    payment_ref text        NOT NULL DEFAULT '',
    stream_id   text        NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

-- sold stays the units of every persisted order of the round (cancelled and
-- expired ones included), so with units given back and sold again it can
-- pass quantity. The last guard against oversell becomes: sold never passes
-- quantity plus the units Redis had given back when the latest persisted
-- reservation was made (each order event carries that count; the reserve
-- script can only sell what was seeded plus what came back). This holds
-- whatever order concurrent writers commit in, which a count of recorded
-- releases would not.
ALTER TABLE sale_rounds ADD COLUMN released_seen integer NOT NULL DEFAULT 0 CHECK (released_seen >= 0);
ALTER TABLE sale_rounds DROP CONSTRAINT sale_rounds_check;
ALTER TABLE sale_rounds ADD CONSTRAINT sale_rounds_sold_check
    CHECK (sold >= 0 AND sold <= quantity + released_seen);

-- +goose Down
ALTER TABLE sale_rounds DROP CONSTRAINT sale_rounds_sold_check;
ALTER TABLE sale_rounds ADD CONSTRAINT sale_rounds_check CHECK (sold >= 0 AND sold <= quantity);
ALTER TABLE sale_rounds DROP COLUMN released_seen;
DROP TABLE order_transitions;
ALTER TABLE orders DROP COLUMN expires_at;
