-- +goose Up
-- Refunds: a paid order an admin pays back becomes 'refunded'. It is the
-- one final state that follows another, so the order writer updates the
-- order's transition row from 'paid' to 'refunded' (and only that way):
-- at stays the payment's time (paid_at), refunded_at is the refund's,
-- and stream_id and recorded_at become the refund's, for the audit and
-- the best-seller rebuild that go by when the final state was recorded.
ALTER TABLE order_transitions DROP CONSTRAINT order_transitions_status_check;
ALTER TABLE order_transitions ADD CONSTRAINT order_transitions_status_check
    CHECK (status IN ('paid', 'cancelled', 'expired', 'refunded'));
ALTER TABLE order_transitions ADD COLUMN refunded_at timestamptz;

-- +goose Down
UPDATE order_transitions SET status = 'paid' WHERE status = 'refunded'; -- they were paid
ALTER TABLE order_transitions DROP COLUMN refunded_at;
ALTER TABLE order_transitions DROP CONSTRAINT order_transitions_status_check;
ALTER TABLE order_transitions ADD CONSTRAINT order_transitions_status_check
    CHECK (status IN ('paid', 'cancelled', 'expired'));
