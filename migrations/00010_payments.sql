-- +goose Up
-- Payments with a provider: one row per payment (a Stripe PaymentIntent,
-- a test provider's charge), keyed by the provider's id. An order may have
-- several (a declined card, then another); the order shows the one it was
-- paid with, else its latest. The order's Redis status stays the judge of
-- paid, expired and cancelled: this is what the provider said about the
-- money. No foreign key to orders: a webhook may tell of a payment before
-- the writer has written its order, or of one for an order this shop never
-- had (recorded, then refunded).
CREATE TABLE payments (
    id             text        PRIMARY KEY,
    provider       text        NOT NULL,
    order_id       uuid        NOT NULL,
    status         text        NOT NULL,
    -- The status's place in a payment's life (docs/design/payments.md):
    -- an update never moves a payment back, so events may come out of
    -- order.
    status_rank    smallint    NOT NULL,
    amount_cents   bigint      NOT NULL CHECK (amount_cents >= 0),
    refunded_cents bigint      NOT NULL DEFAULT 0 CHECK (refunded_cents >= 0 AND refunded_cents <= amount_cents),
    -- Kept while the payment needs the shopper (3-D Secure): the storefront
    -- finishes it with this. Cleared once the payment is settled.
    client_secret  text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    updated_at     timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX payments_order_id ON payments (order_id, updated_at DESC);

-- The provider's webhook events, by event id: recorded before their
-- effect, claimed while it runs, marked applied after it. A repeat finds
-- the row and does nothing; a crash between record and mark leaves the
-- row unapplied, and the next delivery or `shop payments reconcile`
-- applies it.
CREATE TABLE payment_events (
    id          text        PRIMARY KEY,
    provider    text        NOT NULL,
    type        text        NOT NULL,
    payload     bytea       NOT NULL, -- the signed body, as received
    received_at timestamptz NOT NULL DEFAULT now(),
    -- A delivery applying the event holds it until then (a lease: a
    -- delivery that died lets it lapse).
    claimed_until timestamptz,
    applied_at  timestamptz
);
CREATE INDEX payment_events_unapplied ON payment_events (received_at) WHERE applied_at IS NULL;

-- +goose Down
DROP TABLE payment_events;
DROP TABLE payments;
