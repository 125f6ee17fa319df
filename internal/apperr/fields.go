package apperr

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Field is a FieldError whose message is formatted.
func Field(name, format string, args ...any) FieldError {
	return FieldError{Field: name, Message: fmt.Sprintf(format, args...)}
}

// CheckName refuses a name of no characters or more than max, blank, or
// holding a control character: what the catalog and the stores show.
func CheckName(field, v string, max int) []FieldError {
	switch n := utf8.RuneCountInString(v); {
	case n == 0 || n > max:
		return []FieldError{Field(field, "must be 1 to %d characters", max)}
	case strings.TrimSpace(v) == "":
		return []FieldError{Field(field, "must not be blank")}
	case strings.ContainsFunc(v, unicode.IsControl):
		return []FieldError{Field(field, "must not contain control characters")}
	}
	return nil
}

// CheckText refuses a text of more than max characters, or one with a
// control character other than line breaks and tabs (PostgreSQL text
// cannot even hold NUL).
func CheckText(field, v string, max int) []FieldError {
	if utf8.RuneCountInString(v) > max {
		return []FieldError{Field(field, "must be at most %d characters", max)}
	}
	if strings.ContainsFunc(v, func(r rune) bool { return unicode.IsControl(r) && r != '\n' && r != '\r' && r != '\t' }) {
		return []FieldError{Field(field, "must not contain control characters other than line breaks and tabs")}
	}
	return nil
}
