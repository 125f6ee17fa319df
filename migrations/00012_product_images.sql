-- +goose Up
-- Product images: at most one per product, its bytes kept here (the system
-- of record, like the product). sha256 is the hex SHA-256 of the bytes: it
-- names the image in its URL and ETag, so a new image gets a new URL and
-- browsers may cache one for good. Deleting the product deletes its image.
CREATE TABLE product_images (
    sku          text COLLATE "C" PRIMARY KEY REFERENCES products (sku) ON DELETE CASCADE,
    content_type text        NOT NULL CHECK (content_type IN ('image/png', 'image/jpeg', 'image/webp')),
    sha256       text        NOT NULL CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    bytes        bytea       NOT NULL CHECK (octet_length(bytes) BETWEEN 1 AND 2097152),
    updated_at   timestamptz NOT NULL DEFAULT now()
);

-- +goose Down
DROP TABLE product_images;
