package inventory

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"image"
	"image/jpeg"
	"image/png"
	"io"
	"net/url"

	"golang.org/x/image/webp"

	"github.com/shop-oss/shop/internal/apperr"
)

// Product images: one per product, its bytes in PostgreSQL
// (product_images), its hash in the product's cached record, so that
// image_url costs reads nothing. More in docs/design/inventory.md
// ("Images").

// MaxImageBytes is the largest image an admin may upload.
const MaxImageBytes = 2 << 20

// maxImagePixels bounds an image's area before it is decoded in full: a
// few kilobytes of PNG can claim a picture of gigabytes.
const maxImagePixels = 4096 * 4096

// Errors of SetImage and Image (wrapped).
var (
	// ErrImageType: the body is not one of the image types taken.
	ErrImageType = apperr.NewError(apperr.CodeUnsupportedMedia, "an image must be image/png, image/jpeg or image/webp")
	// ErrImageTooLarge: the body is over MaxImageBytes.
	ErrImageTooLarge = apperr.NewError(apperr.CodePayloadTooLarge, "an image is at most 2 MiB")
	// ErrImageNotFound: the product has no image of that hash.
	ErrImageNotFound = apperr.NewError(apperr.CodeNotFound, "image not found")
)

// imageDecoders are the decoders of the image types taken, by media type.
var imageDecoders = map[string]struct {
	config func(io.Reader) (image.Config, error)
	decode func(io.Reader) (image.Image, error)
}{
	"image/png":  {png.DecodeConfig, png.Decode},
	"image/jpeg": {jpeg.DecodeConfig, jpeg.Decode},
	"image/webp": {webp.DecodeConfig, webp.Decode},
}

// Image is a product's image as stored.
type Image struct {
	ContentType string
	SHA256      string // hex, of Bytes
	Bytes       []byte
}

// ImageURL is the relative URL of a product's image; "" (none) is JSON
// null. A string rather than a pointer keeps Product comparable, which
// productJSON relies on.
type ImageURL string

// MarshalJSON writes "" as null.
func (u ImageURL) MarshalJSON() ([]byte, error) {
	if u == "" {
		return []byte("null"), nil
	}
	return json.Marshal(string(u))
}

// imageURL is where the image of sku with that hash is served: the hash
// in the path gives a new image a new URL, so each may be cached for good.
func imageURL(sku, hash string) ImageURL {
	if hash == "" {
		return ""
	}
	return ImageURL("/api/v1/products/" + url.PathEscape(sku) + "/image/" + hash)
}

// checkImage tells whether body is an image of contentType that decodes
// in full. It returns ErrImageType, ErrImageTooLarge or an
// invalid_request error.
func checkImage(contentType string, body []byte) error {
	dec, ok := imageDecoders[contentType]
	if !ok {
		return ErrImageType
	}
	if len(body) > MaxImageBytes {
		return ErrImageTooLarge
	}
	cfg, err := dec.config(bytes.NewReader(body))
	if err != nil {
		return apperr.Invalid(apperr.Field("body", "does not decode as %s", contentType))
	}
	if cfg.Width < 1 || cfg.Height < 1 || cfg.Width*cfg.Height > maxImagePixels {
		return apperr.Invalid(apperr.Field("body", "an image is 1 to 16,777,216 pixels"))
	}
	// The header alone passes a truncated file, which no browser shows.
	if _, err := dec.decode(bytes.NewReader(body)); err != nil {
		return apperr.Invalid(apperr.Field("body", "does not decode as %s", contentType))
	}
	return nil
}

// SetImage makes body, of contentType, the image of sku, and returns its
// URL. It returns ErrProductNotFound, ErrImageType, ErrImageTooLarge, an
// invalid_request error (body does not decode), or a 503 error.
func (s *Catalog) SetImage(ctx context.Context, sku, contentType string, body []byte) (ImageURL, error) {
	if !ValidSKU(sku) {
		return "", fmt.Errorf("set image of %q: %w", sku, ErrProductNotFound)
	}
	if err := checkImage(contentType, body); err != nil {
		return "", fmt.Errorf("set image of %s: %w", sku, err)
	}
	sum := sha256.Sum256(body)
	img := Image{ContentType: contentType, SHA256: hex.EncodeToString(sum[:]), Bytes: body}
	rec, err := s.writeImage(ctx, sku, func(ctx context.Context, q rowQuerier) error {
		return upsertImage(ctx, q, sku, img)
	})
	if err != nil {
		return "", err
	}
	return imageURL(rec.SKU, rec.Image), nil
}

// DeleteImage removes the image of sku. It returns ErrProductNotFound (no
// such product, or one without an image) or a 503 error.
func (s *Catalog) DeleteImage(ctx context.Context, sku string) error {
	if !ValidSKU(sku) {
		return fmt.Errorf("delete image of %q: %w", sku, ErrProductNotFound)
	}
	_, err := s.writeImage(ctx, sku, func(ctx context.Context, q rowQuerier) error {
		return deleteImage(ctx, q, sku)
	})
	return err
}

// writeImage runs write under the product's lock, as Update does, so that
// the record written through to the cache is the one PostgreSQL holds
// after it; then updates the cache as every catalog write does.
func (s *Catalog) writeImage(ctx context.Context, sku string, write func(context.Context, rowQuerier) error) (record, error) {
	conn, unlock, err := lockSale(ctx, s.db, sku)
	if err != nil {
		return record{}, err
	}
	defer unlock()
	f := s.cache.Fence(ctx, productKey(sku))
	if err := write(ctx, conn); err != nil {
		return record{}, err
	}
	rec, err := s.selectProductOn(ctx, conn, sku)
	if err != nil {
		return record{}, err
	}
	s.afterWrite(ctx, f, &rec, rec.Category)
	return rec, nil
}

// Image returns the image of sku whose hash is hash; with withBytes false,
// Bytes is left empty (a conditional request answered 304). It returns
// ErrImageNotFound (also for a malformed sku or hash, or a replaced
// image) or a 503 error.
func (s *Catalog) Image(ctx context.Context, sku, hash string, withBytes bool) (Image, error) {
	if !ValidSKU(sku) || !validHash(hash) {
		return Image{}, fmt.Errorf("image of %q: %w", sku, ErrImageNotFound)
	}
	img, err := s.selectImage(ctx, sku, hash, withBytes)
	if errors.Is(err, ErrImageNotFound) {
		return Image{}, err
	}
	if err != nil {
		return Image{}, readError("image of "+sku, err)
	}
	return img, nil
}

// validHash tells whether h is a lowercase hex SHA-256, as URLs carry.
func validHash(h string) bool {
	if len(h) != 2*sha256.Size {
		return false
	}
	for _, c := range []byte(h) {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}
