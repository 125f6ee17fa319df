-- +goose Up
-- The highest admission rate a round's room has had (PATCH may lower it
-- after admissions): shop audit bounds the admissions by it, so a rate
-- lowered late does not make an honest room look too fast. NULL: never
-- changed since seeding (room_admit_per_second is the highest).
ALTER TABLE sale_rounds ADD COLUMN room_admit_per_second_max integer
    CHECK (room_admit_per_second_max >= 1);

-- +goose Down
ALTER TABLE sale_rounds DROP COLUMN room_admit_per_second_max;
