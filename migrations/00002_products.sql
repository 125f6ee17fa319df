-- +goose Up
-- Products: the catalog's system of record (Redis only caches it). sku and
-- category use the "C" collation so that listings are ordered bytewise,
-- whatever the database's locale, and keyset pagination (sku > cursor)
-- agrees with that order. The checks repeat the API's validation so that no
-- other writer can store what the API would refuse.
CREATE TABLE products (
    sku         text COLLATE "C" PRIMARY KEY CHECK (sku ~ '^[A-Za-z0-9._-]{1,64}$'),
    name        text        NOT NULL CHECK (char_length(name) BETWEEN 1 AND 200),
    description text        NOT NULL DEFAULT '' CHECK (char_length(description) <= 5000),
    category    text COLLATE "C" NOT NULL CHECK (category ~ '^[A-Za-z0-9._-]{1,64}$'),
    price_cents bigint      NOT NULL CHECK (price_cents BETWEEN 0 AND 100000000000),
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now()
);
-- Category listings: WHERE category = $1 AND sku > $2 ORDER BY sku.
CREATE INDEX products_category_sku_idx ON products (category, sku);

-- +goose Down
DROP TABLE products;
