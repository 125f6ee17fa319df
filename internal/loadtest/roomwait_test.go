package loadtest

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"strings"
	"testing"
	"testing/iotest"
	"time"

	vegeta "github.com/tsenart/vegeta/v12/lib"
)

func TestReadEvent(t *testing.T) {
	long := `{"state":"waiting","entry_id":"` + strings.Repeat("e", 5000) + `"}`
	for _, c := range []struct {
		name   string
		stream string
		want   []sseEvent
	}{
		{"one event", "event: queue\ndata: {\"state\":\"waiting\"}\n\n",
			[]sseEvent{{"queue", `{"state":"waiting"}`}}},
		{"keep-alives", ": keep-alive\n\n: keep-alive\n\nevent: queue\ndata: {}\n\n: keep-alive\n\n",
			[]sseEvent{{"queue", "{}"}}},
		{"several events", "event: queue\ndata: 1\n\nevent: queue\ndata: 2\n\nevent: other\ndata: 3\n\n",
			[]sseEvent{{"queue", "1"}, {"queue", "2"}, {"other", "3"}}},
		{"data over lines, no space, CRLF", "event:queue\r\ndata:a\r\ndata: b\r\nid: 7\r\n\r\n",
			[]sseEvent{{"queue", "a\nb"}}},
		{"no data is no event", "event: queue\n\ndata: x\n\n", []sseEvent{{"", "x"}}},
		{"a long line", "event: queue\ndata: " + long + "\n\n", []sseEvent{{"queue", long}}},
		{"ends inside an event", "event: queue\ndata: 1\n\nevent: queue\ndata: {\"sta", []sseEvent{{"queue", "1"}}},
		{"ends before its blank line", "event: queue\ndata: 1\n", nil},
		{"empty", "", nil},
	} {
		// One byte a read: every line arrives split into parts.
		for _, r := range []io.Reader{strings.NewReader(c.stream), iotest.OneByteReader(strings.NewReader(c.stream))} {
			if got := readAll(bufio.NewScanner(r)); !reflect.DeepEqual(got, c.want) {
				t.Errorf("%s: %q, want %q", c.name, got, c.want)
			}
		}
	}
}

// A stream that breaks ends the events read, the error left in the
// scanner.
func TestReadEventBroken(t *testing.T) {
	broken := errors.New("connection reset")
	sc := bufio.NewScanner(io.MultiReader(strings.NewReader("event: queue\ndata: 1\n\nevent: queue\nda"), iotest.ErrReader(broken)))
	if got := readAll(sc); !reflect.DeepEqual(got, []sseEvent{{"queue", "1"}}) || !errors.Is(sc.Err(), broken) {
		t.Errorf("%q, %v", got, sc.Err())
	}
}

func readAll(sc *bufio.Scanner) []sseEvent {
	var evs []sseEvent
	for {
		ev, ok := readEvent(sc)
		if !ok {
			return evs
		}
		evs = append(evs, ev)
	}
}

// A stream that ends before the ticket is final is replaced by one read
// of the ticket and a new stream, at the read's events_url; a 404 is a
// stream that ended at once.
func TestFollowReopens(t *testing.T) {
	streams := map[string][]string{
		"/a": {"event: queue\ndata: {\"state\":\"waiting\"}\n\n: keep-alive\n\n"}, // then the server restarts
		"/b": {"", "event: queue\ndata: {\"state\":\"waiting\"}\n\nevent: queue\ndata: {\"state\":\"admitted\",\"pass\":\"p\"}\n\n"},
	}
	var opened []string
	rr := &roomRun{}
	w := ticketWaiter{cfg: Config{Room: &RoomConfig{AdmitPerSecond: 1}}, queue: "/queue", deadline: time.Now().Add(time.Minute), rr: rr,
		call: func(string, string, any, http.Header) (*vegeta.Result, error) {
			return &vegeta.Result{Code: http.StatusOK, Body: []byte(`{"state":"waiting","events_url":"/b"}`)}, nil
		},
		open: func(_ context.Context, url string) (*http.Response, error) {
			opened = append(opened, url)
			body := streams[url][0]
			streams[url] = streams[url][1:]
			code := http.StatusOK
			if body == "" {
				code = http.StatusNotFound
			}
			return &http.Response{StatusCode: code, Body: io.NopCloser(strings.NewReader(body))}, nil
		}}
	tk, err := w.follow(context.Background(), "/a")
	if err != nil || tk.State != "admitted" || tk.Pass == nil || *tk.Pass != "p" {
		t.Fatalf("%+v, %v", tk, err)
	}
	if !reflect.DeepEqual(opened, []string{"/a", "/b", "/b"}) || rr.opens != 3 || rr.events != 3 || rr.ticket.Requests != 2 {
		t.Errorf("opened %q: %d opens, %d events, %d reads", opened, rr.opens, rr.events, rr.ticket.Requests)
	}
}
