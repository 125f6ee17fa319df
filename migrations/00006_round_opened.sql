-- +goose Up
-- A round is recorded before Redis opens it, and marked opened after: a
-- row with opened_at NULL never went live (its seeding failed), and the
-- next seeding of its SKU takes it over rather than adding another.
-- Rows recorded before this column were opened when they were seeded.
ALTER TABLE sale_rounds ADD COLUMN opened_at timestamptz;
UPDATE sale_rounds SET opened_at = seeded_at;

-- +goose Down
ALTER TABLE sale_rounds DROP COLUMN opened_at;
