-- +goose Up
-- Pickup stores: the system of record of the Redis geo index, which is
-- rebuilt from this table. The checks repeat the API's validation; the
-- latitude bound is the one Redis geo sets accept (Web Mercator).
CREATE TABLE stores (
    id         text COLLATE "C" PRIMARY KEY CHECK (id ~ '^[A-Za-z0-9._-]{1,64}$'),
    name       text             NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    address    text             NOT NULL DEFAULT '' CHECK (char_length(address) <= 500),
    lng        double precision NOT NULL CHECK (lng BETWEEN -180 AND 180),
    lat        double precision NOT NULL CHECK (lat BETWEEN -85.05112878 AND 85.05112878),
    created_at timestamptz      NOT NULL DEFAULT now(),
    updated_at timestamptz      NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE stores;
