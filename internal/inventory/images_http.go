package inventory

import (
	"mime"
	"strings"

	"github.com/gofiber/fiber/v2"
)

// imageCacheControl lets browsers and proxies keep an image for a year
// without asking again: its URL names its content (imageURL).
const imageCacheControl = "public, max-age=31536000, immutable"

// IsImageUpload tells whether a request is an image upload, whose body
// may be larger than the JSON routes' limit (up to MaxImageBytes). It
// matches the way the router does: any case, a trailing slash or not.
func IsImageUpload(method, path string) bool {
	p := strings.TrimSuffix(strings.ToLower(path), "/")
	return method == fiber.MethodPut && strings.HasPrefix(p, "/api/v1/admin/products/") &&
		strings.HasSuffix(p, "/image") && strings.Count(p, "/") == 6
}

func (h handler) putImage(c *fiber.Ctx) error {
	// A type that does not parse is no type taken: 415.
	contentType, _, _ := mime.ParseMediaType(string(c.Request().Header.ContentType()))
	// The raw body: c.Body() would inflate a Content-Encoding, past any
	// size limit.
	u, err := h.catalog.SetImage(c.UserContext(), param(c, "sku"), contentType, c.Request().Body())
	if err != nil {
		return err
	}
	return c.JSON(fiber.Map{"image_url": u})
}

func (h handler) deleteImage(c *fiber.Ctx) error {
	if err := h.catalog.DeleteImage(c.UserContext(), param(c, "sku")); err != nil {
		return err
	}
	return c.SendStatus(fiber.StatusNoContent)
}

// image serves an image at its URL. The ETag is its hash: a client that
// holds it gets 304 without the bytes being read.
func (h handler) image(c *fiber.Ctx) error {
	hash := param(c, "hash")
	etag := `"` + hash + `"`
	fresh := etagMatches(c.Get(fiber.HeaderIfNoneMatch), etag)
	img, err := h.catalog.Image(c.UserContext(), param(c, "sku"), hash, !fresh)
	if err != nil {
		return err
	}
	c.Set(fiber.HeaderETag, etag)
	c.Set(fiber.HeaderCacheControl, imageCacheControl)
	if fresh {
		return c.SendStatus(fiber.StatusNotModified)
	}
	c.Set(fiber.HeaderContentType, img.ContentType)
	c.Set(fiber.HeaderXContentTypeOptions, "nosniff")
	return c.Send(img.Bytes)
}

// etagMatches is If-None-Match's weak comparison (RFC 9110, 13.1.2):
// header lists entity tags, or is "*".
func etagMatches(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}
