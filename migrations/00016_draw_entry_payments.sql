-- +goose Up
-- What the provider said of an entry's hold that its row contradicts
-- (docs/design/draws.md, "Webhooks and reconcile"): a succeeded intent
-- whose entry was not won, a cancelled one whose entry was. Recorded by
-- the webhook and `shop payments reconcile`, never repaired: the audit
-- reports every row where payment_mismatch <> ''.
ALTER TABLE draw_entries
    ADD COLUMN payment_mismatch    text NOT NULL DEFAULT ''
        CHECK (payment_mismatch IN ('', 'succeeded_not_won', 'canceled_won')),
    ADD COLUMN payment_mismatch_at timestamptz;
CREATE INDEX draw_entries_mismatch ON draw_entries (round_id) WHERE payment_mismatch <> '';

-- +goose Down
DROP INDEX draw_entries_mismatch;
ALTER TABLE draw_entries DROP COLUMN payment_mismatch_at, DROP COLUMN payment_mismatch;
