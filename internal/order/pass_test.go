package order

import (
	"slices"
	"strings"
	"testing"
)

func TestParsePasses(t *testing.T) {
	for header, want := range map[string][]string{
		"":              nil,
		" , ,":          nil,
		"a":             {"a"},
		" a , b,,c ":    {"a", "b", "c"},
		"a b, c\td":     {"a b", "c\td"}, // kept, to match nothing (passArg)
		"\u00e9t\u00e9": {"\u00e9t\u00e9"},
	} {
		if got := ParsePasses(header); !slices.Equal(got, want) {
			t.Errorf("ParsePasses(%q) = %q, want %q", header, got, want)
		}
	}
	if got := ParsePasses(strings.Repeat("p,", 2*MaxPasses)); len(got) != MaxPasses {
		t.Errorf("%d passes kept, want %d", len(got), MaxPasses)
	}
}

// passArg leaves out what cannot be a pass, so the script's comma split
// never makes a pass the buyer did not present.
func TestPassArg(t *testing.T) {
	long := strings.Repeat("p", MaxPassSize)
	for _, tc := range []struct {
		in   []string
		want string
	}{
		{nil, ""},
		{[]string{"a", "b"}, "a,b"},
		{[]string{"a,b", "c"}, "c"},
		{[]string{"a b", "", "c\x00", "\u00e9", "d"}, "d"},
		{[]string{long, long + "p"}, long},
	} {
		if got := passArg(tc.in); got != tc.want {
			t.Errorf("passArg(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	many := make([]string, MaxPasses+5)
	for i := range many {
		many[i] = "p"
	}
	if got := strings.Count(passArg(many), "p"); got != MaxPasses {
		t.Errorf("%d passes sent, want %d", got, MaxPasses)
	}
}
