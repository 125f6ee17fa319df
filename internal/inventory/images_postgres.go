package inventory

import (
	"context"
	"errors"
	"fmt"

	"github.com/jackc/pgx/v5"
)

// The SQL of product images. A change of image is a change of the
// product (its image_url), so it moves the product's updated_at too.
const (
	upsertImageSQL = `WITH p AS (UPDATE products SET updated_at = now() WHERE sku = $1 RETURNING sku)
INSERT INTO product_images (sku, content_type, sha256, bytes)
SELECT sku, $2, $3, $4 FROM p
ON CONFLICT (sku) DO UPDATE
SET content_type = EXCLUDED.content_type, sha256 = EXCLUDED.sha256, bytes = EXCLUDED.bytes, updated_at = now()
RETURNING sku`

	// A product without an image is left as it was.
	deleteImageSQL = `WITH d AS (DELETE FROM product_images WHERE sku = $1 RETURNING sku)
UPDATE products SET updated_at = CASE WHEN EXISTS (SELECT 1 FROM d) THEN now() ELSE updated_at END
WHERE sku = $1 RETURNING sku`

	// The bytes only when asked: a conditional request needs none.
	selectImageSQL = `SELECT content_type, sha256, CASE WHEN $3 THEN bytes ELSE ''::bytea END
FROM product_images WHERE sku = $1 AND sha256 = $2`
)

// upsertImage stores img as the image of sku, or returns
// ErrProductNotFound.
func upsertImage(ctx context.Context, q rowQuerier, sku string, img Image) error {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var got string
	err := q.QueryRow(ctx, upsertImageSQL, sku, img.ContentType, img.SHA256, img.Bytes).Scan(&got)
	return imageWriteError("store the image of "+sku, err)
}

// deleteImage drops the image of sku, if any, or returns
// ErrProductNotFound.
func deleteImage(ctx context.Context, q rowQuerier, sku string) error {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var got string
	err := q.QueryRow(ctx, deleteImageSQL, sku).Scan(&got)
	return imageWriteError("delete the image of "+sku, err)
}

func imageWriteError(op string, err error) error {
	if errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("%s: %w", op, ErrProductNotFound)
	}
	if err != nil {
		return dbError(op, err)
	}
	return nil
}

// selectImage returns the image of sku with that hash, or
// ErrImageNotFound.
func (s *Catalog) selectImage(ctx context.Context, sku, hash string, withBytes bool) (Image, error) {
	ctx, cancel := context.WithTimeout(ctx, dbTimeout)
	defer cancel()
	var img Image
	err := s.db.QueryRow(ctx, selectImageSQL, sku, hash, withBytes).Scan(&img.ContentType, &img.SHA256, &img.Bytes)
	if errors.Is(err, pgx.ErrNoRows) {
		return Image{}, fmt.Errorf("image of %s: %w", sku, ErrImageNotFound)
	}
	if err != nil {
		return Image{}, dbError("image of "+sku, err)
	}
	return img, nil
}
