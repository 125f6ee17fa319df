package bench

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"
)

func TestSoldAddsUp(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		accepted, sold, avail, errors float64
		want                          bool
	}{
		{"exact", 5000, 5000, wrkUnits - 5000, 0, true},
		{"in flight at the end", 5000, 5400, wrkUnits - 5400, 0, true},
		{"beyond the connections", 5000, 5401, wrkUnits - 5401, 0, false},
		{"a socket error's unit", 5000, 5401, wrkUnits - 5401, 1, true},
		{"a 202 not sold", 5000, 4999, wrkUnits - 4999, 0, false},
		{"units lost", 5000, 5000, wrkUnits - 5001, 0, false},
	} {
		if got := soldAddsUp(tc.accepted, tc.sold, tc.avail, tc.errors, 2*200); got != tc.want {
			t.Errorf("%s: got %v, want %v", tc.name, got, tc.want)
		}
	}
}

// signUp registers and logs in every shopper through the API and writes
// the token and address wrk-purchase.lua reads.
func TestSignUpWritesShoppers(t *testing.T) {
	var mu sync.Mutex
	seen := map[string]string{} // email -> X-Forwarded-For
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var in map[string]string
		_ = json.NewDecoder(r.Body).Decode(&in)
		switch r.URL.Path {
		case "/api/v1/auth/register":
			mu.Lock()
			seen[in["email"]] = r.Header.Get("X-Forwarded-For")
			mu.Unlock()
			w.WriteHeader(http.StatusCreated)
		case "/api/v1/auth/login":
			if in["device"] != "wrk" {
				http.Error(w, "no device", http.StatusBadRequest)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"access_token": "t-" + r.Header.Get("X-Forwarded-For")})
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	b := &bench{cfg: Config{Users: 300, Out: t.TempDir()}}
	if n := b.signUp(context.Background(), newAPI(srv.URL+"/api/v1"), 1, "shoppers.txt"); n != 300 {
		t.Fatalf("signed up %d of 300", n)
	}
	raw, err := os.ReadFile(b.path("shoppers.txt"))
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	if len(lines) != 300 || lines[0] != "t-198.18.0.1 198.18.0.1" || lines[299] != "t-198.18.1.44 198.18.1.44" {
		t.Errorf("shoppers file: %d lines, first %q, last %q", len(lines), lines[0], lines[len(lines)-1])
	}
	if len(seen) != 300 {
		t.Errorf("%d distinct sign-ups, want 300", len(seen))
	}
}
