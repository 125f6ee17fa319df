package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/internal/apperr"
)

// Decode parses the request body, which must be one JSON object, into v.
// A malformed body, a body that is not an object, trailing data, or a value
// of the wrong type or out of range answers 400 invalid_request naming the
// field. Unknown fields are ignored: clients may send more than we read, and
// fields we do not own (a price, an owner) must never be taken from them.
// Where every member is an instruction (settings, a change), UnknownMembers
// finds the ones to refuse instead.
func Decode(c *fiber.Ctx, v any) error {
	return decode(c.Body(), v, false)
}

// DecodeOptional is Decode for routes whose body may be empty; an empty body
// leaves v as it was (its defaults).
func DecodeOptional(c *fiber.Ctx, v any) error {
	return decode(c.Body(), v, true)
}

func decode(body []byte, v any, optional bool) error {
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 {
		if optional {
			return nil
		}
		return invalidBody("the request body is empty; a JSON object is expected")
	}
	if trimmed[0] != '{' {
		return invalidBody("the request body must be a JSON object")
	}
	if err := checkUTF8(trimmed); err != nil {
		return err
	}
	// The common case, one well-formed object of the right types, costs one
	// Unmarshal: it accepts exactly what the stream below accepts, with the
	// same result, for a third of the allocations. Anything it refuses is
	// decoded again below, which tells the errors apart as clients see them.
	if json.Unmarshal(trimmed, v) == nil {
		return nil
	}
	return decodeStream(trimmed, v)
}

// checkUTF8 refuses a body that is not UTF-8 or holds a lone surrogate
// escape: encoding/json would turn either into U+FFFD, making "\xff" and
// "\xfe" one password, and RFC 8259 §8.1 calls them malformed.
func checkUTF8(body []byte) error {
	if !utf8.Valid(body) || hasLoneSurrogate(body) {
		return invalidBody("the request body is not valid UTF-8 JSON")
	}
	return nil
}

// hasLoneSurrogate reports whether a \u escape in body names half of a
// UTF-16 surrogate pair without its other half. In JSON a backslash only
// starts an escape inside a string, so no string tracking is needed.
func hasLoneSurrogate(body []byte) bool {
	for i := bytes.IndexByte(body, '\\'); i >= 0 && i+1 < len(body); {
		if body[i+1] != 'u' {
			i = next(body, i+2)
			continue
		}
		r, ok := hex4(body, i+2)
		switch {
		case !ok || !utf16.IsSurrogate(r):
		case r >= 0xDC00: // a low half first
			return true
		default: // a high half must be followed by a low one
			if i+12 > len(body) || body[i+6] != '\\' || body[i+7] != 'u' {
				return true
			}
			lo, ok := hex4(body, i+8)
			if !ok || lo < 0xDC00 || lo > 0xDFFF {
				return true
			}
			i += 6
		}
		i = next(body, i+6)
	}
	return false
}

// next is the index of the first backslash at or after from, or -1.
func next(body []byte, from int) int {
	if from >= len(body) {
		return -1
	}
	if j := bytes.IndexByte(body[from:], '\\'); j >= 0 {
		return from + j
	}
	return -1
}

// hex4 reads the four hex digits of a \u escape at body[at:].
func hex4(body []byte, at int) (rune, bool) {
	if at+4 > len(body) {
		return 0, false
	}
	n, err := strconv.ParseUint(string(body[at:at+4]), 16, 32)
	return rune(n), err == nil
}

// decodeStream decodes the first JSON value of body into v and insists
// that nothing follows it.
func decodeStream(trimmed []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	if err := dec.Decode(v); err != nil {
		return decodeError(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return invalidBody("the request body must hold exactly one JSON object")
	}
	return nil
}

func decodeError(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		field := te.Field
		if field == "" {
			field = "body"
		}
		return apperr.Invalid(apperr.FieldError{Field: field, Message: fmt.Sprintf("must be %s", describe(te.Type.String()))})
	}
	return invalidBody("the request body is not valid JSON")
}

func describe(goType string) string {
	switch {
	case strings.HasPrefix(goType, "int"), strings.HasPrefix(goType, "uint"):
		return "an integer in range"
	case goType == "string":
		return "a string"
	case goType == "bool":
		return "a boolean"
	case strings.HasPrefix(goType, "[]"):
		return "an array"
	case strings.HasPrefix(goType, "*"):
		return describe(goType[1:])
	default:
		return "of the right type"
	}
}

// UnknownMembers returns the members of the JSON object obj that are not
// among known, spelt exactly, sorted. It is for an object whose every
// member is an instruction, such as settings or a change: an unknown one
// (a misspelling, or a setting the route cannot change) ignored would
// leave its value as it was or take its default while the answer says
// the request succeeded, and encoding/json alone would even take
// "Admit_Per_Second" for admit_per_second. An obj that is not a JSON
// object is a 400 naming body.
func UnknownMembers(obj []byte, known ...string) ([]string, error) {
	var members map[string]json.RawMessage
	if err := json.Unmarshal(obj, &members); err != nil || members == nil {
		return nil, invalidBody("the request body must be a JSON object")
	}
	var out []string
	for k := range members {
		if !slices.Contains(known, k) {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out, nil
}

func invalidBody(msg string) error {
	return apperr.Invalid(apperr.FieldError{Field: "body", Message: msg})
}
