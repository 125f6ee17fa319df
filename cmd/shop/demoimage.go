package main

import (
	"bytes"
	"crypto/sha256"
	"image"
	"image/color"
	"image/png"
)

// demoImageSize is the side of a demo product's square picture.
const demoImageSize = 240

// demoImage draws the demo picture of sku as a PNG: a two-colour
// gradient with a few discs and bars, every colour and place taken from
// the SHA-256 of the sku, so each product gets its own picture, the same
// on every run, with no files shipped beside the binary.
func demoImage(sku string) []byte {
	sum := sha256.Sum256([]byte(sku))
	img := image.NewNRGBA(image.Rect(0, 0, demoImageSize, demoImageSize))
	top, bottom := demoColour(sum[0:3], 90), demoColour(sum[3:6], 40)
	for y := range demoImageSize {
		c := blend(top, bottom, y)
		for x := range demoImageSize {
			img.SetNRGBA(x, y, c)
		}
	}
	for i := range 3 {
		b := sum[6+6*i : 12+6*i]
		drawShape(img, b, demoColour(b[3:6], 160))
	}
	var out bytes.Buffer
	if err := png.Encode(&out, img); err != nil {
		panic(err) // an in-memory NRGBA always encodes
	}
	return out.Bytes()
}

// demoColour is an opaque colour from three bytes, lifted by at least
// floor in each channel so shapes stand out from a darker background.
func demoColour(b []byte, floor uint8) color.NRGBA {
	lift := func(v byte) uint8 { return floor + uint8(int(v)*int(255-floor)/255) }
	return color.NRGBA{R: lift(b[0]), G: lift(b[1]), B: lift(b[2]), A: 255}
}

// blend is the gradient's colour at row y.
func blend(a, b color.NRGBA, y int) color.NRGBA {
	mix := func(p, q uint8) uint8 { return uint8((int(p)*(demoImageSize-y) + int(q)*y) / demoImageSize) }
	return color.NRGBA{R: mix(a.R, b.R), G: mix(a.G, b.G), B: mix(a.B, b.B), A: 255}
}

// drawShape draws a disc or a bar, by b[0]'s lowest bit, centred at b[1],
// b[2] (scaled to the picture), its size from b[3].
func drawShape(img *image.NRGBA, b []byte, c color.NRGBA) {
	cx, cy := int(b[1])*demoImageSize/256, int(b[2])*demoImageSize/256
	r := demoImageSize/10 + int(b[3])%(demoImageSize/4)
	for y := max(cy-r, 0); y < min(cy+r, demoImageSize); y++ {
		for x := max(cx-r, 0); x < min(cx+r, demoImageSize); x++ {
			dx, dy := x-cx, y-cy
			disc := b[0]&1 == 0
			if (disc && dx*dx+dy*dy <= r*r) || (!disc && 3*abs(dy) <= r) {
				img.SetNRGBA(x, y, c)
			}
		}
	}
}

func abs(v int) int { return max(v, -v) }
