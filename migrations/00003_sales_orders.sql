-- +goose Up
-- A sale round is one seeding of a SKU's stock by an admin. The live state
-- (what is left, who bought how much) is in Redis; this row records what was
-- seeded and, through the order writer, how much was confirmed sold. The
-- CHECK is the last guard against oversell: an order event that would push
-- sold past quantity (Redis state lost in a failover, a forged event) makes
-- its transaction fail and the event is dead-lettered instead.
-- sku has no foreign key: rounds and orders are history and outlive a
-- deleted product.
CREATE TABLE sale_rounds (
    id             bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    sku            text        NOT NULL,
    quantity       integer     NOT NULL CHECK (quantity >= 0),
    sold           integer     NOT NULL DEFAULT 0 CHECK (sold >= 0 AND sold <= quantity),
    per_user_limit integer     NOT NULL CHECK (per_user_limit >= 0),
    price_cents    bigint      NOT NULL CHECK (price_cents >= 0),
    starts_at      timestamptz,
    ends_at        timestamptz CHECK (ends_at IS NULL OR starts_at IS NULL OR ends_at > starts_at),
    seeded_at      timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX sale_rounds_sku_id ON sale_rounds (sku, id DESC);

-- Orders are written only by the order writer, keyed by the id the server
-- made before the reservation script ran, so a redelivered event inserts
-- nothing (ON CONFLICT (id) DO NOTHING).
CREATE TABLE orders (
    id           uuid        PRIMARY KEY,
    user_id      uuid        NOT NULL REFERENCES users (id),
    total_cents  bigint      NOT NULL CHECK (total_cents >= 0),
    stream_id    text        NOT NULL,
    created_at   timestamptz NOT NULL,
    confirmed_at timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX orders_user_created ON orders (user_id, created_at DESC, id DESC);

CREATE TABLE order_items (
    order_id    uuid    NOT NULL REFERENCES orders (id) ON DELETE CASCADE,
    sku         text    NOT NULL,
    round_id    bigint  NOT NULL REFERENCES sale_rounds (id),
    quantity    integer NOT NULL CHECK (quantity > 0),
    price_cents bigint  NOT NULL CHECK (price_cents >= 0),
    PRIMARY KEY (order_id, sku)
);
CREATE INDEX order_items_round ON order_items (round_id);

-- +goose Down
DROP TABLE order_items;
DROP TABLE orders;
DROP TABLE sale_rounds;
