package inventory

import (
	"encoding/json"
	"slices"
	"testing"
	"time"

	"github.com/shop-oss/shop/internal/apperr"
)

// The waiting_room member of a seeding: each bad setting is reported
// under its own field, another member too (a misspelt setting must not
// quietly take its default), and good ones take their defaults.
func TestRoomBodyValidation(t *testing.T) {
	t.Parallel()
	now := time.Now()
	for _, c := range []struct {
		room   string
		fields []string // nil: valid
		want   *RoomSettings
	}{
		{`null`, nil, nil},
		{`{"admit_per_second":5}`, nil, &RoomSettings{AdmitPerSecond: 5, PassTTL: DefaultPassTTL}},
		{`{"admit_per_second":100000,"pass_ttl_seconds":3600,"challenge_bits":24}`, nil,
			&RoomSettings{AdmitPerSecond: 100000, PassTTL: time.Hour, ChallengeBits: 24}},
		{`{"admit_per_second":1,"pass_ttl_seconds":10,"challenge_bits":0}`, nil,
			&RoomSettings{AdmitPerSecond: 1, PassTTL: 10 * time.Second}},
		{`{}`, []string{"waiting_room.admit_per_second"}, nil},
		{`{"admit_per_second":0}`, []string{"waiting_room.admit_per_second"}, nil},
		{`{"admit_per_second":100001}`, []string{"waiting_room.admit_per_second"}, nil},
		{`{"admit_per_second":5,"pass_ttl_seconds":9}`, []string{"waiting_room.pass_ttl_seconds"}, nil},
		{`{"admit_per_second":5,"pass_ttl_seconds":3601}`, []string{"waiting_room.pass_ttl_seconds"}, nil},
		{`{"admit_per_second":5,"challenge_bits":-1}`, []string{"waiting_room.challenge_bits"}, nil},
		{`{"admit_per_second":5,"challenge_bits":25}`, []string{"waiting_room.challenge_bits"}, nil},
		{`{"admit_per_second":5,"pass_ttl":30}`, []string{"waiting_room.pass_ttl"}, nil},
		{`{"Admit_Per_Second":5}`, []string{"waiting_room.Admit_Per_Second"}, nil},
	} {
		_, seed, err := decodeAndValidate(t, `{"quantity":1,"waiting_room":`+c.room+`}`, now)
		if c.fields == nil {
			if err != nil {
				t.Errorf("%s: %v", c.room, err)
			} else if !sameRoom(seed.Room, c.want) {
				t.Errorf("%s: room %+v, want %+v", c.room, seed.Room, c.want)
			}
			continue
		}
		wantInvalidFields(t, c.room, err, c.fields)
	}
	// A setting of the wrong type names its field too.
	var b seedBody
	err := json.Unmarshal([]byte(`{"quantity":1,"waiting_room":{"admit_per_second":"x"}}`), &b)
	if te, ok := err.(*json.UnmarshalTypeError); !ok || te.Field != "waiting_room.admit_per_second" {
		t.Errorf("wrong type: %#v, want an UnmarshalTypeError of waiting_room.admit_per_second", err)
	}
}

// decodeAndValidate is what the seeding handler does with body at now. The
// cases are all well-formed JSON, so one that does not decode is a broken
// test.
func decodeAndValidate(t *testing.T, body string, now time.Time) (seedBody, Seed, error) {
	t.Helper()
	var b seedBody
	if err := json.Unmarshal([]byte(body), &b); err != nil {
		t.Fatalf("%s: %v", body, err)
	}
	seed, err := b.validate(now)
	return b, seed, err
}

// wantInvalidFields reports unless err is a validation error naming
// exactly the fields want, sorted: the order validate finds them in is not
// the contract.
func wantInvalidFields(t *testing.T, name string, err error, want []string) {
	t.Helper()
	var fields []string
	if ae, ok := err.(*apperr.Error); ok {
		for _, fe := range ae.Fields {
			fields = append(fields, fe.Field)
		}
	}
	slices.Sort(fields)
	if !slices.Equal(fields, want) {
		t.Errorf("%s: fields %v (%v), want %v", name, fields, err, want)
	}
}
