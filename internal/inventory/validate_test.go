package inventory

import (
	"encoding/base64"
	"errors"
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"
	"github.com/shop-oss/shop/internal/apperr"
	"github.com/valyala/fasthttp"
)

var fuzzApp = fiber.New()

// codeRE is what a code is (validate.go), as a regular expression.
var codeRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// validCode accepts exactly what codeRE matches.
func TestValidCodeIsTheRegexp(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("a", maxCodeLen)
	for _, s := range []string{"", "a", "A", "0", ".", "..", "-a", "_a", ".a", "a.", "a-b_c.d", "a b", "a/b",
		"a:b", "é", "a\x00", long, long + "a", "Z" + long[1:], "a\n"} {
		if got, want := validCode(s), codeRE.MatchString(s); got != want {
			t.Errorf("validCode(%q) = %v, the regexp says %v", s, got, want)
		}
	}
}

// BenchmarkValidCode is a sku's check by the regexp and by validCode.
func BenchmarkValidCode(b *testing.B) {
	const sku = "phone-2026.black_128"
	b.Run("regexp", func(b *testing.B) {
		for b.Loop() {
			if !codeRE.MatchString(sku) {
				b.Fatal("refused")
			}
		}
	})
	b.Run("validCode", func(b *testing.B) {
		for b.Loop() {
			if !validCode(sku) {
				b.Fatal("refused")
			}
		}
	})
}

func FuzzValidCode(f *testing.F) {
	for _, s := range []string{"", "a", "..", "a.b", strings.Repeat("x", 65), "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := validCode(s), codeRE.MatchString(s); got != want {
			t.Fatalf("validCode(%q) = %v, the regexp says %v", s, got, want)
		}
	})
}

// parseBody runs parseProductBody on a raw body, as the handler does.
func parseBody(body []byte, pathSKU string) (string, ProductInput, error) {
	fctx := &fasthttp.RequestCtx{}
	fctx.Request.SetBody(body)
	c := fuzzApp.AcquireCtx(fctx)
	defer fuzzApp.ReleaseCtx(c)
	return parseProductBody(c, pathSKU)
}

var bodyFields = map[string]bool{"body": true, "sku": true, "name": true, "description": true, "category": true, "price_cents": true}

// FuzzProductBody: any body either parses into input that PostgreSQL's
// checks accept, or is refused with invalid_request naming known fields;
// never a panic, never another error.
func FuzzProductBody(f *testing.F) {
	for _, s := range []string{
		`{"sku":"a-1","name":"A","category":"c","price_cents":1}`,
		`{"sku":"a","name":"A","description":"d\n\t","category":"c","price_cents":100000000000}`,
		`{"sku":"","name":"","category":"!","price_cents":-1,"description":7}`,
		`{"sku":"a","name":"a\u0000","category":"c","price_cents":1e3}`,
		"{\"sku\":\"a\",\"name\":\"\xff\xfe\",\"category\":\"c\",\"price_cents\":1}",
		`{"a[-1]":"x","a.18446744073704":1}`, `{"price_cents":99999999999999999999}`, `[]`, `null`, ``,
	} {
		f.Add([]byte(s), false)
		f.Add([]byte(s), true)
	}
	f.Fuzz(func(t *testing.T, body []byte, update bool) {
		pathSKU := ""
		if update {
			pathSKU = "path-sku"
		}
		sku, in, err := parseBody(body, pathSKU)
		if err == nil {
			if !codeRE.MatchString(sku) || len(validateInput(in)) > 0 || !utf8.ValidString(in.Name+in.Description) {
				t.Fatalf("accepted invalid input %q %+v from %q", sku, in, body)
			}
			return
		}
		var e *apperr.Error
		if !errors.As(err, &e) || e.Code != apperr.CodeInvalidRequest || len(e.Fields) == 0 {
			t.Fatalf("body %q: error %v, want invalid_request with fields", body, err)
		}
		for _, fe := range e.Fields {
			if !bodyFields[fe.Field] || fe.Message == "" {
				t.Fatalf("body %q: field error %+v", body, fe)
			}
		}
	})
}

func TestNameAndDescriptionLengthsCountCharacters(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   ProductInput
		bad  []string
	}{
		{"multibyte_at_limit", ProductInput{Name: strings.Repeat("日", 200), Description: strings.Repeat("é", 5000), Category: "c"}, nil},
		{"multibyte_over_limit", ProductInput{Name: strings.Repeat("日", 201), Description: strings.Repeat("é", 5001), Category: "c"}, []string{"name", "description"}},
		{"control_chars", ProductInput{Name: "a\tb", Description: "x\x07", Category: "c"}, []string{"name", "description"}},
		{"price_bounds", ProductInput{Name: "a", Category: "c", PriceCents: MaxPriceCents + 1}, []string{"price_cents"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, fe := range validateInput(tc.in) {
				got = append(got, fe.Field)
			}
			if strings.Join(got, ",") != strings.Join(tc.bad, ",") {
				t.Errorf("bad fields = %v, want %v", got, tc.bad)
			}
		})
	}
}

func TestCursorRoundTrip(t *testing.T) {
	t.Parallel()
	for _, c := range []listCursor{{0, "a"}, {7, "A-b_c.9"}, {maxChunk, strings.Repeat("z", 64)}, {-1, "legacy"}} {
		if got, ok := decodeCursor(encodeCursor(c)); !ok || got != c {
			t.Errorf("cursor of %+v decodes to %+v %v", c, got, ok)
		}
	}
	b64 := func(s string) string { return base64.RawURLEncoding.EncodeToString([]byte(s)) }
	for _, bad := range []string{
		"!!", "YQ==", b64("a b"), b64(strings.Repeat("z", 65)), b64("0:"), b64(":a"), b64("1:2:a"),
		b64("-1:a"), b64("01:a"), b64("+1:a"), b64("1e3:a"), b64("10000001:a"), b64("99999999999999999999:a"),
		b64("0:.."), b64(".."), b64("1 :a"),
	} {
		if c, ok := decodeCursor(bad); ok {
			t.Errorf("cursor %q accepted as %+v", bad, c)
		}
	}
}
