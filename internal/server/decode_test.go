package server

import (
	"bytes"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/shop-oss/shop/internal/apperr"
)

type sample struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
	Price    *int64 `json:"price_cents"`
}

func TestDecode(t *testing.T) {
	tests := []struct {
		name     string
		body     string
		optional bool
		field    string // the field the error names; "" means success
	}{
		{"ok", `{"sku":"a","quantity":2}`, false, ""},
		{"unknown_fields_ignored", `{"sku":"a","owner":"b"}`, false, ""},
		{"empty_optional", ``, true, ""},
		{"empty", ``, false, "body"},
		{"null", `null`, false, "body"},
		{"array", `[]`, false, "body"},
		{"string", `"x"`, false, "body"},
		{"malformed", `{"sku":`, false, "body"},
		{"trailing", `{} {}`, false, "body"},
		{"trailing_garbage", `{}x`, false, "body"},
		{"wrong_type", `{"quantity":"2"}`, false, "quantity"},
		{"fraction", `{"quantity":1.5}`, false, "quantity"},
		{"overflow", `{"quantity":99999999999999999999}`, false, "quantity"},
		{"nested_wrong_type", `{"price_cents":true}`, false, "price_cents"},
		{"invalid_utf8", "{\"sku\":\"\xff\xff\"}", false, "body"},
		{"invalid_utf8_key", "{\"\xfe\":1}", false, "body"},
		{"truncated_utf8", "{\"sku\":\"\xc3\"}", false, "body"},
		{"lone_high_surrogate", `{"sku":"\ud800"}`, false, "body"},
		{"lone_low_surrogate", `{"sku":"\udc00x"}`, false, "body"},
		{"high_then_other_escape", `{"sku":"\ud800\u0041"}`, false, "body"},
		{"high_at_end", `{"sku":"a\uD83D"}`, false, "body"},
		{"surrogate_pair", `{"sku":"\ud83d\ude00"}`, false, ""},
		{"escaped_backslash_then_u", `{"sku":"\\ud800"}`, false, ""},
		{"bmp_escape", `{"sku":"\u00e9\u0041"}`, false, ""},
		{"raw_utf8", `{"sku":"é😀"}`, false, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var v sample
			err := decode([]byte(tc.body), &v, tc.optional)
			if tc.field == "" {
				if err != nil {
					t.Fatalf("unexpected error %v", err)
				}
				return
			}
			var e *apperr.Error
			if !errors.As(err, &e) || e.Code != apperr.CodeInvalidRequest || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
				t.Fatalf("error = %#v, want invalid_request on %q", err, tc.field)
			}
		})
	}
}

// FuzzDecode: any bytes either decode or give an invalid_request error;
// never a panic, never another kind of error.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"sku":"a","quantity":1}`, `{"a[-1]":"x"}`, `{"a.18446744073704":1}`, "{\"sku\":\"\x00\xff\"}", `{"quantity":-0}`, `[]`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var v sample
		err := decode(body, &v, false)
		var e *apperr.Error
		if err != nil && (!errors.As(err, &e) || e.Code != apperr.CodeInvalidRequest) {
			t.Fatalf("decode(%q) = %v", body, err)
		}
	})
}

// FuzzDecodeAsStream: decode's Unmarshal fast path changes nothing a client
// sees: for any body, the same error (or none) and the same value as the
// stream decoding alone.
func FuzzDecodeAsStream(f *testing.F) {
	for _, s := range []string{`{"sku":"a","quantity":1}`, `{} {}`, `{}x`, `{"quantity":"2"} x`, `{"quantity":1.5,"sku":"b"}`,
		`{"sku":"a"} {"sku":"b"}`, `{"price_cents":true,"quantity":2}`, `{"quantity":99999999999999999999}`, `{"sku":`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		trimmed := bytes.TrimSpace(body)
		if len(trimmed) == 0 || trimmed[0] != '{' {
			return // refused before either decoding
		}
		var got, want sample
		wantErr := checkUTF8(trimmed) // decode's check before either path
		if wantErr == nil {
			wantErr = decodeStream(trimmed, &want)
		}
		gotErr := decode(body, &got, false)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || (gotErr == nil && !reflect.DeepEqual(got, want)) {
			t.Fatalf("decode(%q) = %v, %+v; the stream alone gives %v, %+v", body, gotErr, got, wantErr, want)
		}
	})
}

// BenchmarkDecode is a purchase body decoded as every purchase decodes it.
func BenchmarkDecode(b *testing.B) {
	body := []byte(`{"quantity":1}`)
	for _, bc := range []struct {
		name string
		fn   func([]byte, any) error
	}{
		{"decode", func(p []byte, v any) error { return decode(p, v, true) }},
		{"stream_only", decodeStream},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				var v struct {
					Quantity *int64 `json:"quantity"`
				}
				if err := bc.fn(body, &v); err != nil || v.Quantity == nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestUnknownMembers(t *testing.T) {
	tests := []struct {
		name string
		body string
		want []string
		bad  bool
	}{
		{"known_only", `{"a":1,"b":null}`, nil, false},
		{"empty", `{}`, nil, false},
		{"others_sorted", `{"z":1,"a":2,"y":{}}`, []string{"y", "z"}, false},
		{"case_matters", `{"A":1}`, []string{"A"}, false},
		{"nested_not_looked_into", `{"b":{"c":1}}`, nil, false},
		{"array", `[]`, nil, true},
		{"null", `null`, nil, true},
		{"malformed", `{"a":`, nil, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := UnknownMembers([]byte(tc.body), "a", "b")
			var ae *apperr.Error
			if tc.bad != (err != nil) || (err != nil && !errors.As(err, &ae)) {
				t.Fatalf("error %v, want one: %v", err, tc.bad)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("got %q, want %q", got, tc.want)
			}
		})
	}
}
