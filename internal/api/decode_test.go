package api

import (
	"errors"
	"testing"
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
			var e *Error
			if !errors.As(err, &e) || e.Code != CodeInvalidRequest || len(e.Fields) != 1 || e.Fields[0].Field != tc.field {
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
		var e *Error
		if err != nil && (!errors.As(err, &e) || e.Code != CodeInvalidRequest) {
			t.Fatalf("decode(%q) = %v", body, err)
		}
	})
}
