package logbuf

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

// sink records each write it gets.
type sink struct {
	mu     sync.Mutex
	writes []string
}

func (s *sink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.writes = append(s.writes, string(p))
	return len(p), nil
}

func (s *sink) got() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.writes...)
}

// never is an interval no test reaches.
const never = time.Hour

// TestBatches: lines wait in the buffer and go out in one write, in order,
// at Close; writes after Close go straight through.
func TestBatches(t *testing.T) {
	var s sink
	w := New(&s, never, 0)
	var want strings.Builder
	for i := range 100 {
		line := fmt.Sprintf("line %d\n", i)
		want.WriteString(line)
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	if got := s.got(); len(got) != 0 {
		t.Fatalf("%d writes before any flush, want 0", len(got))
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if got := s.got(); len(got) != 1 || got[0] != want.String() {
		t.Fatalf("writes after Close = %q, want one write of every line in order", got)
	}
	if _, err := w.Write([]byte("late\n")); err != nil {
		t.Fatal(err)
	}
	if got := s.got(); len(got) != 2 || got[1] != "late\n" {
		t.Fatalf("a write after Close was not written through: %q", got)
	}
}

// TestLinesStayWhole: a line that does not fit the free space flushes what
// is waiting first, so no line is ever split across two writes, and a
// line longer than the buffer goes out whole.
func TestLinesStayWhole(t *testing.T) {
	var s sink
	w := New(&s, never, 64)
	line := strings.Repeat("x", 39) + "\n"
	for range 10 {
		if _, err := w.Write([]byte(line)); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("y", 199) + "\n"
	if _, err := w.Write([]byte(long)); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got := s.got()
	for _, g := range got[:len(got)-1] {
		if len(g)%len(line) != 0 || strings.Contains(g, "y") {
			t.Fatalf("a write of %d bytes splits a line: %q", len(g), got)
		}
	}
	if got[len(got)-1] != long {
		t.Fatalf("last write = %q, want the long line whole", got[len(got)-1])
	}
}

// TestWarningsGoOutAtOnce: through Handler, an Info record waits, a Warn
// record is written at once with everything before it.
func TestWarningsGoOutAtOnce(t *testing.T) {
	var s sink
	w := New(&s, never, 0)
	defer w.Close()
	log := slog.New(Handler(slog.NewJSONHandler(w, nil), w)).With("app", "shop").WithGroup("g")
	log.Info("request", "status", 200)
	if got := s.got(); len(got) != 0 {
		t.Fatalf("an info line was written at once: %q", got)
	}
	log.Warn("slow", "status", 503)
	got := strings.Join(s.got(), "")
	if !strings.Contains(got, `"msg":"request"`) || !strings.Contains(got, `"msg":"slow"`) ||
		strings.Index(got, "request") > strings.Index(got, "slow") || !strings.Contains(got, `"app":"shop"`) {
		t.Fatalf("after a warning the sink has %q, want both lines in order, with their attributes", got)
	}
}

// TestFlushesOnItsOwn: lines reach the writer without Close or a warning.
func TestFlushesOnItsOwn(t *testing.T) {
	var s sink
	w := New(&s, 10*time.Millisecond, 0)
	defer w.Close()
	if _, err := w.Write([]byte("hello\n")); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second) // generous: a loaded machine
	for len(s.got()) == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the line was not flushed within 10s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConcurrentWriters: lines from many goroutines all arrive, whole.
func TestConcurrentWriters(t *testing.T) {
	var out bytes.Buffer
	var mu sync.Mutex
	w := New(writerFunc(func(p []byte) (int, error) {
		mu.Lock()
		defer mu.Unlock()
		return out.Write(p)
	}), time.Millisecond, 256)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 200 {
				_, _ = fmt.Fprintf(w, "g%d line %03d\n", g, i)
			}
		})
	}
	wg.Wait()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n")
	if len(lines) != 8*200 {
		t.Fatalf("%d lines, want %d", len(lines), 8*200)
	}
	for _, l := range lines {
		if len(l) != len("g0 line 000") {
			t.Fatalf("a line came out mangled: %q", l)
		}
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
