-- +goose Up
-- Users: shoppers and admins. Emails are unique case-insensitively through
-- the index on lower(email); the column keeps what the user typed.
CREATE TABLE users (
    id            uuid PRIMARY KEY,
    email         text        NOT NULL CHECK (length(email) BETWEEN 3 AND 254),
    name          text        NOT NULL DEFAULT '' CHECK (length(name) <= 200),
    role          text        NOT NULL DEFAULT 'shopper' CHECK (role IN ('shopper', 'admin')),
    password_hash text        NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    updated_at    timestamptz NOT NULL DEFAULT now()
);
CREATE UNIQUE INDEX users_email_lower_key ON users (lower(email));

-- +goose Down
DROP TABLE users;
