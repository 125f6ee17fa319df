-- +goose Up
-- Every charge the payment provider made, recorded before the order is
-- marked paid (pay.lua), keyed by the provider's idempotency key (the order
-- and a hash of the payment token). A pay retried after a crash between the
-- charge and the pay script finds its charge here and reuses it instead of
-- charging again, whatever the provider remembers across restarts (the
-- built-in test provider remembers nothing). refunded_at is set when the
-- charge is given back (it lost the race to expiry or cancellation, or was
-- a second charge of an order already paid). No foreign key to orders: the
-- order row is the writer's, and an order is payable only once persisted.
CREATE TABLE payments (
    charge_key   text        PRIMARY KEY,
    order_id     uuid        NOT NULL,
    amount_cents bigint      NOT NULL CHECK (amount_cents >= 0),
    payment_ref  text        NOT NULL UNIQUE,
    charged_at   timestamptz NOT NULL DEFAULT now(),
    refunded_at  timestamptz
);
CREATE INDEX payments_order ON payments (order_id);

-- +goose Down
DROP TABLE payments;
