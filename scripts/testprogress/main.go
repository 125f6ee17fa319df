// Command testprogress reads `go test -json` on stdin and prints what a
// plain `go test ./...` would, but as each package finishes: its ok, FAIL
// or "no test files" line, a failed test's whole output, and any output
// of a package that is not a test's (a panic, a timeout, a build error).
// A failed test's output ends with a recap of its rare lines (recap), so
// that the tail of a long log still says why it failed.
//
// Plain `go test` prints its packages' results in import-path order, so a
// package that runs for minutes (e2e) holds back every result after it;
// `go test -json` streams them. scripts/test.sh pipes through this; it
// exits 1 when a test or package failed, 0 otherwise.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"regexp"
	"strings"
)

// event is the part of a test2json event read here.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
}

// line is one line of a test's output, kept until the test ends.
type line struct{ test, text string }

func main() {
	held := map[string][]line{} // by package: output of tests still running
	failed := false
	out := bufio.NewWriter(os.Stdout)
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 1<<20), 16<<20)
	for in.Scan() {
		var e event
		if err := json.Unmarshal(in.Bytes(), &e); err != nil || e.Action == "" {
			fmt.Fprintln(out, in.Text()) // not an event: go's own message
			out.Flush()
			continue
		}
		top, _, _ := strings.Cut(e.Test, "/")
		switch {
		case e.Action == "build-output":
			fmt.Fprint(out, e.Output)
		case e.Action == "output" && e.Test == "":
			if e.Output != "PASS\n" { // -json's -v; plain go test leaves it out
				fmt.Fprint(out, e.Output)
			}
		case e.Action == "output":
			held[e.Package] = append(held[e.Package], line{e.Test, e.Output})
		case e.Test != "" && e.Test == top && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			// A top-level test ended: print its output and its subtests'
			// when it failed, drop it otherwise.
			var rest, mine []line
			for _, l := range held[e.Package] {
				if t, _, _ := strings.Cut(l.test, "/"); t != top {
					rest = append(rest, l)
				} else if e.Action == "fail" {
					fmt.Fprint(out, l.text)
					mine = append(mine, l)
				}
			}
			held[e.Package] = rest
			if e.Action == "fail" {
				recap(out, top, mine)
			}
			failed = failed || e.Action == "fail"
		case e.Test == "" && (e.Action == "pass" || e.Action == "fail" || e.Action == "skip"):
			if e.Action == "fail" {
				failed = true
				for _, l := range held[e.Package] { // tests cut short
					fmt.Fprint(out, l.text)
				}
			}
			delete(held, e.Package)
		}
		out.Flush()
	}
	if err := in.Err(); err != nil {
		fmt.Fprintln(os.Stderr, "testprogress:", err)
		os.Exit(1)
	}
	if failed {
		os.Exit(1)
	}
}

// place is where a test's output line was logged: "    name_test.go:12: ".
var place = regexp.MustCompile(`^\s+(\S+\.go:\d+): `)

// recap prints again, after a failed test's output, its lines from places
// that logged at most three times (with their continuation lines). A test
// fails with a message or two, while a relay of a server's log (e2e's)
// prints from one place hundreds of times and would otherwise be all a
// CI log's tail shows.
func recap(out io.Writer, test string, lines []line) {
	from := make([]string, len(lines)) // each line's place, "" for go's own
	count := map[string]int{}
	last := ""
	for i, l := range lines {
		switch m := place.FindStringSubmatch(l.text); {
		case m != nil:
			last = m[1]
			count[last]++
			from[i] = last
		case strings.HasPrefix(l.text, "        "): // a message's next line
			from[i] = last
		default:
			last = ""
		}
	}
	var rare []string
	for i, l := range lines {
		if from[i] != "" && count[from[i]] <= 3 {
			rare = append(rare, l.text)
		}
	}
	if len(rare) == 0 || len(rare) == len(lines) {
		return // nothing to tell apart: the output above is the recap
	}
	fmt.Fprintf(out, "--- recap of %s: its lines from places that logged at most three times\n", test)
	for _, text := range rare {
		fmt.Fprint(out, text)
	}
}
