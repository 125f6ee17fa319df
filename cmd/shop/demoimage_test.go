package main

import (
	"bytes"
	"image/png"
	"testing"
)

func TestDemoImagesAreDistinctPNGs(t *testing.T) {
	t.Parallel()
	seen := map[string]string{}
	for _, p := range demoCatalog {
		b := demoImage(p.sku)
		img, err := png.Decode(bytes.NewReader(b))
		if err != nil || img.Bounds().Dx() != demoImageSize {
			t.Fatalf("%s: %v %v", p.sku, err, img)
		}
		if other, ok := seen[string(b)]; ok {
			t.Fatalf("%s draws the same picture as %s", p.sku, other)
		}
		seen[string(b)] = p.sku
		if !bytes.Equal(demoImage(p.sku), b) {
			t.Fatalf("%s draws another picture on a second run", p.sku)
		}
	}
}
