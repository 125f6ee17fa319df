package auth

import (
	"errors"
	"strings"
	"testing"
)

func TestHashPasswordIsOWASPArgon2id(t *testing.T) {
	t.Parallel()
	h, err := hashPassword("correct horse")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(h, "$argon2id$v=19$m=19456,t=2,p=1$") {
		t.Fatalf("hash %q is not argon2id with m=19456 KiB, t=2, p=1", h)
	}
	p, err := parsePHC(h)
	if err != nil {
		t.Fatalf("our own hash does not parse: %v", err)
	}
	if p.memory < 19*1024 || p.time < 2 || p.threads != 1 || len(p.salt) != 16 || len(p.key) != 32 {
		t.Errorf("parameters %+v below the OWASP minimum", p)
	}
	again, _ := hashPassword("correct horse")
	if again == h {
		t.Error("two hashes of one password are equal: the salt is not random")
	}
	for _, tc := range []struct {
		password string
		want     bool
	}{
		{"correct horse", true},
		{"correct horsE", false},
		{"correct hors", false},
		{"", false},
	} {
		ok, err := verifyPassword(h, tc.password)
		if err != nil || ok != tc.want {
			t.Errorf("verify(%q) = %v, %v; want %v", tc.password, ok, err, tc.want)
		}
	}
}

func TestDummyHashParsesAndMatchesNothing(t *testing.T) {
	t.Parallel()
	// An unparsable dummy would make unknown-email logins fast (an error
	// before any hashing) and so reveal which emails exist.
	p, err := parsePHC(dummyHash)
	if err != nil {
		t.Fatalf("dummyHash: %v", err)
	}
	if p.memory != argonMemoryKiB || p.time != argonTime || p.threads != argonThreads || len(p.key) != argonKeyLen {
		t.Errorf("dummyHash parameters %+v differ from the real ones: timing would differ", p)
	}
	if ok, _ := verifyPassword(dummyHash, "password"); ok {
		t.Error("dummyHash matches a password")
	}
}

func TestParsePHCRejectsMalformed(t *testing.T) {
	t.Parallel()
	salt, key := "c2hvcC1kdW1teS1zYWx0IQ", "ZHVtbXkga2V5LCBtYXRjaGVzIG5vIHBhc3N3b3JkISE"
	tests := []struct{ name, hash string }{
		{"empty", ""},
		{"bcrypt", "$2a$10$abcdefghijklmnopqrstuuABCDEFGHIJKLMNOPQRSTUVWXYZ01234"},
		{"argon2i", "$argon2i$v=19$m=19456,t=2,p=1$" + salt + "$" + key},
		{"old_version", "$argon2id$v=16$m=19456,t=2,p=1$" + salt + "$" + key},
		{"missing_part", "$argon2id$v=19$m=19456,t=2,p=1$" + salt},
		{"extra_part", "$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$" + key + "$x"},
		{"params_garbled", "$argon2id$v=19$m=19456;t=2;p=1$" + salt + "$" + key},
		{"params_trailing", "$argon2id$v=19$m=19456,t=2,p=1x$" + salt + "$" + key},
		{"memory_huge", "$argon2id$v=19$m=4194304,t=2,p=1$" + salt + "$" + key},
		{"time_zero", "$argon2id$v=19$m=19456,t=0,p=1$" + salt + "$" + key},
		{"time_huge", "$argon2id$v=19$m=19456,t=1000,p=1$" + salt + "$" + key},
		{"threads_zero", "$argon2id$v=19$m=19456,t=2,p=0$" + salt + "$" + key},
		{"threads_overflow", "$argon2id$v=19$m=19456,t=2,p=257$" + salt + "$" + key},
		{"negative", "$argon2id$v=19$m=-1,t=2,p=1$" + salt + "$" + key},
		{"salt_not_base64", "$argon2id$v=19$m=19456,t=2,p=1$!!!!$" + key},
		{"salt_short", "$argon2id$v=19$m=19456,t=2,p=1$YWJj$" + key},
		{"key_short", "$argon2id$v=19$m=19456,t=2,p=1$" + salt + "$YWJj"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := parsePHC(tc.hash); !errors.Is(err, errMalformedHash) {
				t.Errorf("parsePHC(%q) = %v, want errMalformedHash", tc.hash, err)
			}
			if ok, err := verifyPassword(tc.hash, "password"); ok || err == nil {
				t.Errorf("verifyPassword accepted a malformed hash")
			}
		})
	}
}

// FastHashing is a development knob: new hashes are cheap, logins work,
// and unknown emails are checked against a dummy of the same cost.
func TestFastHashing(t *testing.T) {
	t.Parallel()
	svc := New(nil, nil, Config{FastHashing: true}, nil, nil)
	h, err := hashPasswordAt(svc.cost, "correct horse")
	if err != nil || !strings.Contains(h, "$m=1024,t=1,p=1$") {
		t.Fatalf("fast hash = %q, %v", h, err)
	}
	if ok, err := verifyPassword(h, "correct horse"); !ok || err != nil {
		t.Fatalf("verify: %v %v", ok, err)
	}
	if !strings.Contains(svc.dummy, "$m=1024,t=1,p=1$") {
		t.Fatalf("dummy hash %q does not cost what real ones do", svc.dummy)
	}
	if def := New(nil, nil, Config{}, nil, nil); def.cost != owaspCost || def.dummy != dummyHash {
		t.Fatal("the default is not the OWASP cost")
	}
}
