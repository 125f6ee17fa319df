package catalogtest

import (
	"bytes"
	"encoding/json"
	"image"
	"image/color"
	"image/jpeg"
	"image/png"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/shop-oss/shop/internal/inventory"
)

// pngOf is a w×h PNG of one colour.
func pngOf(t testing.TB, w, h int, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, w, h))
	for x := range w {
		for y := range h {
			img.Set(x, y, c)
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func jpegOf(t testing.TB) []byte {
	t.Helper()
	var b bytes.Buffer
	if err := jpeg.Encode(&b, image.NewGray(image.Rect(0, 0, 8, 8)), nil); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// webp1x1 is a 1×1 lossless WebP (there is no encoder in Go).
var webp1x1 = []byte{0x52, 0x49, 0x46, 0x46, 0x1a, 0x00, 0x00, 0x00, 0x57, 0x45, 0x42, 0x50,
	0x56, 0x50, 0x38, 0x4c, 0x0d, 0x00, 0x00, 0x00, 0x2f, 0x00, 0x00, 0x00, 0x10, 0x07, 0x10,
	0x11, 0x11, 0x88, 0x88, 0xfe, 0x07, 0x00}

// putImage uploads body as sku's image with contentType.
func (in *instance) putImage(t testing.TB, sku, contentType string, body []byte) result {
	t.Helper()
	return in.do(t, http.MethodPut, "/api/v1/admin/products/"+sku+"/image", string(body), "Content-Type", contentType)
}

// imageURLOf uploads body and returns the image_url answered.
func (in *instance) imageURLOf(t testing.TB, sku, contentType string, body []byte) string {
	t.Helper()
	r := in.putImage(t, sku, contentType, body)
	var out struct {
		ImageURL string `json:"image_url"`
	}
	if err := json.Unmarshal(r.body, &out); r.status != http.StatusOK || err != nil || out.ImageURL == "" {
		t.Fatalf("put image of %s: %d %s", sku, r.status, r.body)
	}
	return out.ImageURL
}

func TestProductImageLifecycle(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "tee", "shirts", 100)
	// Read (and cached) before the upload: the write must go through.
	if r := in.do(t, http.MethodGet, "/api/v1/products/tee", ""); !strings.Contains(string(r.body), `"image_url":null`) {
		t.Fatalf("a product without an image: %s", r.body)
	}
	pic := pngOf(t, 3, 2, color.RGBA{R: 200, A: 255})
	u := in.imageURLOf(t, "tee", "image/png", pic)
	if got := in.do(t, http.MethodGet, "/api/v1/products/tee", "").product(t).ImageURL; string(got) != u {
		t.Fatalf("product image_url = %q, want %q", got, u)
	}
	if items := in.do(t, http.MethodGet, "/api/v1/products?category=shirts", "").page(t).Items; len(items) != 1 || string(items[0].ImageURL) != u {
		t.Fatalf("listing = %+v, want image_url %q", items, u)
	}
	r := in.do(t, http.MethodGet, u, "")
	if r.status != http.StatusOK || !bytes.Equal(r.body, pic) || r.header.Get("Content-Type") != "image/png" ||
		r.header.Get("Cache-Control") != "public, max-age=31536000, immutable" || r.header.Get("ETag") == "" {
		t.Fatalf("image: %d %v (%d bytes)", r.status, r.header, len(r.body))
	}
	etag := r.header.Get("ETag")
	for _, inm := range []string{etag, "W/" + etag, `"x", ` + etag, "*"} {
		if r := in.do(t, http.MethodGet, u, "", "If-None-Match", inm); r.status != http.StatusNotModified || len(r.body) != 0 {
			t.Errorf("If-None-Match %s: %d (%d bytes), want 304", inm, r.status, len(r.body))
		}
	}
	if r := in.do(t, http.MethodGet, u, "", "If-None-Match", `"other"`); r.status != http.StatusOK {
		t.Errorf("another ETag: %d, want 200", r.status)
	}

	// A new image gets a new URL; the old one is gone.
	u2 := in.imageURLOf(t, "tee", "image/jpeg; quality=high", jpegOf(t))
	if u2 == u {
		t.Fatalf("a new image kept the URL %s", u)
	}
	in.do(t, http.MethodGet, u, "").problem(t, http.StatusNotFound, "not_found")
	in.do(t, http.MethodGet, u, "", "If-None-Match", etag).problem(t, http.StatusNotFound, "not_found")
	if r := in.do(t, http.MethodGet, u2, ""); r.status != http.StatusOK || r.header.Get("Content-Type") != "image/jpeg" {
		t.Fatalf("new image: %d %v", r.status, r.header)
	}
	u3 := in.imageURLOf(t, "tee", "image/webp", webp1x1)
	if r := in.do(t, http.MethodGet, u3, ""); r.status != http.StatusOK || r.header.Get("Content-Type") != "image/webp" {
		t.Fatalf("webp: %d %v", r.status, r.header)
	}

	for range 2 { // a product without an image answers 204 too
		if r := in.do(t, http.MethodDelete, "/api/v1/admin/products/tee/image", ""); r.status != http.StatusNoContent {
			t.Fatalf("delete image: %d %s", r.status, r.body)
		}
	}
	if r := in.do(t, http.MethodGet, "/api/v1/products/tee", ""); !strings.Contains(string(r.body), `"image_url":null`) {
		t.Fatalf("after delete: %s", r.body)
	}
	in.do(t, http.MethodGet, u3, "").problem(t, http.StatusNotFound, "not_found")
}

func TestProductDeleteDropsItsImage(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "tee", "c", 1)
	u := in.imageURLOf(t, "tee", "image/png", pngOf(t, 1, 1, color.White))
	in.do(t, http.MethodDelete, "/api/v1/admin/products/tee", "")
	in.create(t, "tee", "c", 1)
	if p := in.do(t, http.MethodGet, "/api/v1/products/tee", "").product(t); p.ImageURL != "" {
		t.Fatalf("a product made again has image %q", p.ImageURL)
	}
	in.do(t, http.MethodGet, u, "").problem(t, http.StatusNotFound, "not_found")
}

func TestBadImagesChangeNothing(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "tee", "c", 1)
	u := in.imageURLOf(t, "tee", "image/png", pngOf(t, 2, 2, color.Black))
	before := in.do(t, http.MethodGet, "/api/v1/products/tee", "").product(t)
	pic := pngOf(t, 4, 4, color.White)
	huge := func() []byte { // a PNG claiming 5000×5000 pixels
		b := pngOf(t, 1, 1, color.White)
		b = bytes.Clone(b)
		copy(b[16:24], []byte{0, 0, 0x13, 0x88, 0, 0, 0x13, 0x88})
		return b
	}()
	for _, tc := range []struct {
		name, sku, contentType string
		body                   []byte
		status                 int
		code                   string
	}{
		{"text", "tee", "text/plain", pic, 415, "unsupported_media_type"},
		{"no_type", "tee", "", pic, 415, "unsupported_media_type"},
		{"gif", "tee", "image/gif", pic, 415, "unsupported_media_type"},
		{"json", "tee", "application/json", []byte(`{"a":1}`), 415, "unsupported_media_type"},
		{"png_said_jpeg", "tee", "image/jpeg", pic, 400, "invalid_request"},
		{"jpeg_said_webp", "tee", "image/webp", jpegOf(t), 400, "invalid_request"},
		{"truncated", "tee", "image/png", pic[:len(pic)-20], 400, "invalid_request"},
		{"header_only", "tee", "image/png", pic[:33], 400, "invalid_request"},
		{"garbage", "tee", "image/png", []byte("not an image at all"), 400, "invalid_request"},
		{"empty", "tee", "image/png", nil, 400, "invalid_request"},
		{"too_many_pixels", "tee", "image/png", huge, 400, "invalid_request"},
		{"unknown_sku", "nope", "image/png", pic, 404, "not_found"},
		{"bad_sku", "bad%21sku", "image/png", pic, 404, "not_found"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in.putImage(t, tc.sku, tc.contentType, tc.body).problem(t, tc.status, tc.code)
		})
	}
	in.do(t, http.MethodDelete, "/api/v1/admin/products/nope/image", "").problem(t, http.StatusNotFound, "not_found")
	in.doAs(t, in.users.shopper, http.MethodPut, "/api/v1/admin/products/tee/image", string(pic),
		"Content-Type", "image/png").problem(t, http.StatusForbidden, "forbidden")
	in.doAs(t, "", http.MethodDelete, "/api/v1/admin/products/tee/image", "").problem(t, http.StatusUnauthorized, "unauthorized")
	for _, path := range []string{"/api/v1/products/tee/image/abc", "/api/v1/products/tee/image/" + strings.Repeat("0", 64),
		"/api/v1/products/nope" + u[len("/api/v1/products/tee"):], u[:len(u)-64] + strings.ToUpper(u[len(u)-64:])} {
		in.do(t, http.MethodGet, path, "").problem(t, http.StatusNotFound, "not_found")
	}
	if after := in.do(t, http.MethodGet, "/api/v1/products/tee", "").product(t); after != before {
		t.Fatalf("a refused upload changed the product: %+v, was %+v", after, before)
	}
	if r := in.do(t, http.MethodGet, u, ""); r.status != http.StatusOK {
		t.Fatalf("a refused upload changed the image: %d", r.status)
	}
}

// padded is a valid PNG of n bytes: the decoder stops at the IEND chunk.
func padded(pic []byte, n int) []byte {
	return append(bytes.Clone(pic), make([]byte, n-len(pic))...)
}

func TestImageSizeLimit(t *testing.T) {
	t.Parallel()
	in := newInstance(t, newStores(t))
	in.create(t, "tee", "c", 1)
	pic := padded(pngOf(t, 2, 2, color.White), inventory.MaxImageBytes)
	u := in.imageURLOf(t, "tee", "image/png", pic)
	if r := in.do(t, http.MethodGet, u, ""); !bytes.Equal(r.body, pic) {
		t.Fatalf("a 2 MiB image reads back %d bytes", len(r.body))
	}
	// Over the limit, fasthttp answers before any handler (app.Test cannot
	// show it), and the JSON routes keep their own limit (64 KiB) even
	// though fasthttp now reads bodies up to the images'.
	base := in.Serve(t)
	for _, tc := range []struct {
		name, path, contentType string
		size                    int
	}{
		{"image_over_2MiB", "/api/v1/admin/products/tee/image", "image/png", inventory.MaxImageBytes + 1},
		{"json_over_64KiB", "/api/v1/admin/products/tee", "application/json", 70 << 10},
		{"other_path_1MiB", "/api/v1/admin/products/tee/image/x", "image/png", 1 << 20},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body := padded(pngOf(t, 2, 2, color.White), tc.size)
			if tc.contentType == "application/json" {
				body = []byte(`{"name":"` + strings.Repeat("a", tc.size) + `","category":"c","price_cents":1}`)
			}
			req, _ := http.NewRequest(http.MethodPut, base+tc.path, bytes.NewReader(body))
			req.Header.Set("Content-Type", tc.contentType)
			req.Header.Set("Authorization", "Bearer "+in.users.admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			got, _ := io.ReadAll(resp.Body)
			result{resp.StatusCode, resp.Header, got}.problem(t, http.StatusRequestEntityTooLarge, "payload_too_large")
		})
	}
	if r := in.do(t, http.MethodGet, u, ""); !bytes.Equal(r.body, pic) {
		t.Fatal("a refused upload changed the image")
	}
}
