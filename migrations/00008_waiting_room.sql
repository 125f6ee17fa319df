-- +goose Up
-- A sale round may put its buyers through a waiting room (docs/api.md "Waiting
-- room"). Its settings and its committed seed are the round's, recorded
-- with it; the secret makes the entries' public ids (an HMAC of the user
-- id), so the room's ids can be made again from this row.
ALTER TABLE sale_rounds
    ADD COLUMN room_admit_per_second integer CHECK (room_admit_per_second BETWEEN 1 AND 100000),
    ADD COLUMN room_pass_ttl_seconds integer CHECK (room_pass_ttl_seconds BETWEEN 10 AND 3600),
    ADD COLUMN room_challenge_bits   integer CHECK (room_challenge_bits BETWEEN 0 AND 24),
    ADD COLUMN room_seed             text,
    ADD COLUMN room_secret           text,
    ADD CONSTRAINT sale_rounds_room_whole CHECK (
        (room_admit_per_second IS NULL) = (room_seed IS NULL) AND
        (room_admit_per_second IS NULL) = (room_pass_ttl_seconds IS NULL) AND
        (room_admit_per_second IS NULL) = (room_challenge_bits IS NULL) AND
        (room_admit_per_second IS NULL) = (room_secret IS NULL));

-- A room's outcome, recorded when its round ends or is replaced: the
-- early order's digest and every entry in admission order, so the
-- fairness answer and the entry list outlive the Redis keys.
CREATE TABLE queue_rooms (
    round_id           bigint      PRIMARY KEY REFERENCES sale_rounds (id),
    early_entries      integer     NOT NULL CHECK (early_entries >= 0),
    early_order_sha256 text        NOT NULL,
    entries            integer     NOT NULL CHECK (entries >= early_entries),
    admitted           integer     NOT NULL CHECK (admitted >= 0 AND admitted <= entries),
    recorded_at        timestamptz NOT NULL DEFAULT now()
);

-- user_id has no foreign key, like the rounds' sku: the list is history.
CREATE TABLE queue_entries (
    round_id    bigint      NOT NULL REFERENCES queue_rooms (round_id),
    position    integer     NOT NULL CHECK (position >= 1),
    entry_id    text        NOT NULL,
    user_id     uuid        NOT NULL,
    early       boolean     NOT NULL,
    joined_at   timestamptz NOT NULL,
    admitted_at timestamptz,
    PRIMARY KEY (round_id, position),
    UNIQUE (round_id, entry_id),
    UNIQUE (round_id, user_id)
);

-- +goose Down
DROP TABLE queue_entries;
DROP TABLE queue_rooms;
ALTER TABLE sale_rounds
    DROP CONSTRAINT sale_rounds_room_whole,
    DROP COLUMN room_admit_per_second,
    DROP COLUMN room_pass_ttl_seconds,
    DROP COLUMN room_challenge_bits,
    DROP COLUMN room_seed,
    DROP COLUMN room_secret;
