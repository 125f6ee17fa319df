package bench

import (
	"bytes"
	"testing"
)

const commandStats = "# Commandstats\r\n" +
	"cmdstat_evalsha:calls=1000,usec=130000,usec_per_call=130.00,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_hget:calls=10,usec=5,usec_per_call=0.50,rejected_calls=0,failed_calls=0\r\n" +
	"cmdstat_xadd:calls=2000,usec=6000,usec_per_call=3.00\r\n"

func TestParseCommandStats(t *testing.T) {
	got := parseCommandStats(commandStats)
	want := map[string]cmdStat{"evalsha": {1000, 130000}, "hget": {10, 5}, "xadd": {2000, 6000}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, w := range want {
		if got[k] != w {
			t.Errorf("%s: got %+v, want %+v", k, got[k], w)
		}
	}
}

func TestParseInfo(t *testing.T) {
	got := parseInfo("# Persistence\r\naof_rewrites:3\r\naof_rewrite_in_progress:0\r\n\r\naof_last_write_status:ok\r\n")
	for k, w := range map[string]string{"aof_rewrites": "3", "aof_rewrite_in_progress": "0", "aof_last_write_status": "ok"} {
		if got[k] != w {
			t.Errorf("%s = %q, want %q", k, got[k], w)
		}
	}
}

func TestPerPurchase(t *testing.T) {
	before := map[string]cmdStat{"evalsha": {100, 10000}, "hget": {5, 5}}
	after := map[string]cmdStat{"evalsha": {300, 40000}, "hget": {5, 5}, "xadd": {200, 600}, "get": {400, 800}}
	got := perPurchase(before, after, 200)
	want := []perCall{{"evalsha", 1, 150}, {"get", 2, 4}, {"xadd", 1, 3}}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: got %+v, want %+v", i, got[i], want[i])
		}
	}
	if perPurchase(before, after, 0) != nil {
		t.Error("no purchases: want no rows")
	}
	var b bytes.Buffer
	writePerPurchase(&b, got, 2)
	if want := "evalsha                   1.000   150.00\nget                       2.000     4.00\n"; b.String() != want {
		t.Errorf("table:\n%q\nwant\n%q", b.String(), want)
	}
}

func TestTailOf(t *testing.T) {
	before := map[string]cmdStat{"evalsha": {100, 10000}}
	after := map[string]cmdStat{"evalsha": {1100, 160000}}
	slow := []slowEntry{
		{"evalsha", 10, 1500}, {"evalsha", 11, 12000}, {"set", 12, 2500},
		{"evalsha", 5, 90000}, // before the attack: the shoppers' set-up
	}
	got, ok := tailOf("half", before, after, slow, 10, 20)
	want := redisTail{Phase: "half", Calls: 1000, MeanUsec: 150, Over1: 2, Over10: 1, MaxMs: 12, Others: 1, OthersMaxMs: 2.5}
	if !ok || got != want {
		t.Errorf("got %+v %v, want %+v", got, ok, want)
	}
	if _, ok := tailOf("half", after, after, slow, 0, 99); ok {
		t.Error("no script calls: want no line")
	}
}
