package auth

import (
	"fmt"
	"net/mail"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/shop-oss/shop/internal/apperr"
	"golang.org/x/text/unicode/norm"
)

// Input bounds. Passwords are capped because argon2 work grows with the
// input and a megabyte password per request is a cheap DoS; 128 bytes is
// far beyond any passphrase manager default.
const (
	maxEmailLen    = 254 // RFC 5321 path limit
	minPasswordLen = 8   // characters
	maxPasswordLen = 128 // bytes
	maxNameLen     = 200 // characters, as the users table checks
	maxDeviceLen   = 100 // characters
)

// newAccount is a CreateUser request after normalising.
type newAccount struct {
	email, password, name, role string
}

// normalizeEmail trims an email and puts it in Unicode NFKC, so that
// spellings that look alike are one account: composed and decomposed "é",
// and fullwidth or other compatibility forms ("ｅ" is "e"). Letter case is
// folded by PostgreSQL's lower() on both sides of every match. Invisible
// format characters are refused by checkEmail, not dropped.
func normalizeEmail(email string) string { return norm.NFKC.String(strings.TrimSpace(email)) }

// validateAccount normalises the email, trims the name and checks every
// field. It returns an apperr.Invalid error listing each bad field, or nil.
func validateAccount(a *newAccount) error {
	a.email = normalizeEmail(a.email)
	a.name = strings.TrimSpace(a.name)
	var bad []apperr.FieldError
	add := func(field, msg string) { bad = append(bad, apperr.FieldError{Field: field, Message: msg}) }
	if msg := checkEmail(a.email); msg != "" {
		add("email", msg)
	}
	if msg := checkPassword(a.password); msg != "" {
		add("password", msg)
	}
	if msg := checkText(a.name, maxNameLen); msg != "" {
		add("name", msg)
	}
	if a.role != RoleShopper && a.role != RoleAdmin {
		add("role", "must be shopper or admin")
	}
	if len(bad) > 0 {
		return apperr.Invalid(bad...)
	}
	return nil
}

// checkEmail accepts one bare address (no display name, no angle brackets)
// that net/mail parses, up to 254 bytes.
func checkEmail(email string) string {
	switch {
	case email == "":
		return "is required"
	case len(email) > maxEmailLen:
		return "must be at most 254 characters"
	}
	addr, err := mail.ParseAddress(email)
	if err != nil || addr.Name != "" || addr.Address != email || hasControl(email) || hasFormat(email) {
		return "must be a valid email address like name@example.com"
	}
	return ""
}

func checkPassword(password string) string {
	switch {
	case password == "":
		return "is required"
	case utf8.RuneCountInString(password) < minPasswordLen:
		return "must be at least 8 characters"
	case len(password) > maxPasswordLen:
		return "must be at most 128 bytes"
	}
	return ""
}

// checkText accepts printable UTF-8 of at most limit characters. Control
// characters (NUL above all, which PostgreSQL text refuses) are rejected
// here so the database never sees them.
func checkText(s string, limit int) string {
	switch {
	case !utf8.ValidString(s) || hasControl(s):
		return "must be printable text"
	case utf8.RuneCountInString(s) > limit:
		return fmt.Sprintf("must be at most %d characters", limit)
	}
	return ""
}

// legacyEmail is email as accounts made before NFKC kept it (NFC), so that
// one registered with a fullwidth spelling still logs in with it.
func legacyEmail(email string) string { return norm.NFC.String(strings.TrimSpace(email)) }

// hasFormat reports an invisible format character (zero-width space or
// joiner, a byte order mark, a bidi control): two addresses that differ
// only by one would look the same.
func hasFormat(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.Is(unicode.Cf, r) }) >= 0
}

func hasControl(s string) bool {
	return strings.IndexFunc(s, unicode.IsControl) >= 0
}

// normalizeDevice trims the login's device label; it returns an apperr.Invalid
// error for one that is too long or not printable.
func normalizeDevice(device string) (string, error) {
	device = strings.TrimSpace(device)
	if msg := checkText(device, maxDeviceLen); msg != "" {
		return "", apperr.Invalid(apperr.FieldError{Field: "device", Message: msg})
	}
	if device == "" {
		device = "unknown"
	}
	return device, nil
}
