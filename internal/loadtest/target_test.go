package loadtest

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestResolveTarget(t *testing.T) {
	tests := []struct {
		name, raw   string
		allowRemote bool
		base, dial  string
		err         string
	}{
		{"loopback_ip", "http://127.0.0.1:8080", false, "http://127.0.0.1:8080", "127.0.0.1:8080", ""},
		{"loopback_range", "http://127.9.9.9:81/", false, "http://127.9.9.9:81", "127.9.9.9:81", ""},
		{"ipv6_loopback", "http://[::1]:8080", false, "http://[::1]:8080", "[::1]:8080", ""},
		{"localhost", "http://localhost:8080", false, "http://localhost:8080", ":8080", ""},
		{"default_port", "http://127.0.0.1", false, "http://127.0.0.1", "127.0.0.1:80", ""},
		{"private_ip", "http://10.0.0.8:8080", false, "", "", "not a loopback address"},
		{"public_ip", "https://8.8.8.8", false, "", "", "not a loopback address"},
		{"remote_allowed", "http://10.0.0.8:8080", true, "http://10.0.0.8:8080", "", ""},
		{"path", "http://127.0.0.1:8080/api/v1", false, "", "", "without a path"},
		{"no_scheme", "127.0.0.1:8080", false, "", "", "not an http(s)://host:port URL"},
		{"ftp", "ftp://127.0.0.1", false, "", "", "not an http(s)://host:port URL"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := resolveTarget(context.Background(), tc.raw, tc.allowRemote)
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("err = %v, want %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// localhost may resolve to 127.0.0.1 or ::1: only the port is sure.
			if got.base != tc.base || !strings.HasSuffix(got.dial, tc.dial) || (tc.dial == "") != (got.dial == "") {
				t.Errorf("got %+v, want base %s dial %s", got, tc.base, tc.dial)
			}
		})
	}
}

func TestRemoteRefusalIsMarked(t *testing.T) {
	_, err := resolveTarget(context.Background(), "http://192.168.1.1", false)
	if !errors.Is(err, errNotLoopback) {
		t.Fatalf("err = %v", err)
	}
}

func TestShopperAddr(t *testing.T) {
	if a := shopperAddr(0).String(); a != "198.18.0.1" {
		t.Errorf("shopper 0: %s", a)
	}
	if a := shopperAddr(MaxUsers - 1).String(); a != "198.18.39.16" {
		t.Errorf("last shopper: %s", a)
	}
}

func validConfig() Config {
	return Config{
		Target: "http://127.0.0.1:8080", AdminEmail: "a@example.com", AdminPassword: "password",
		Users: 10, Units: 100, PerUserLimit: 1, Connections: 10, Duration: 10 * time.Second,
		Timeout: time.Second, DrainTimeout: time.Second, Sample: 5, SetupWorkers: 2,
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		err    string
	}{
		{"valid", func(*Config) {}, ""},
		{"no_admin", func(c *Config) { c.AdminPassword = "" }, "--admin-email and --admin-password"},
		{"too_long", func(c *Config) { c.Duration = 11 * time.Minute }, "--duration"},
		{"too_short", func(c *Config) { c.Duration = 0 }, "--duration"},
		{"no_users", func(c *Config) { c.Users = 0 }, "--users"},
		{"too_many_units", func(c *Config) { c.Units = MaxUnits + 1 }, "--units"},
		{"negative_rate", func(c *Config) { c.Rate = -1 }, "--rate"},
		{"no_connections", func(c *Config) { c.Connections = 0 }, "--connections"},
		{"negative_limit", func(c *Config) { c.PerUserLimit = -1 }, "--per-user-limit"},
		{"room_wait_poll", func(c *Config) { c.Room = &RoomConfig{AdmitPerSecond: 1, PassTTL: time.Minute, Wait: WaitPoll} }, ""},
		{"room_wait_unknown", func(c *Config) { c.Room = &RoomConfig{AdmitPerSecond: 1, PassTTL: time.Minute, Wait: "push"} }, "--room-wait"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := validConfig()
			tc.change(&c)
			err := c.Validate()
			if (tc.err == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Errorf("err = %v, want %q", err, tc.err)
			}
		})
	}
}
