// Command testprogress reads `go test -json` on stdin and prints what a
// plain `go test ./...` would, but as each package finishes: its ok, FAIL
// or "no test files" line, a failed test's whole output, and any output
// of a package that is not a test's (a panic, a timeout, a build error).
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
	"os"
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
			var rest []line
			for _, l := range held[e.Package] {
				if t, _, _ := strings.Cut(l.test, "/"); t != top {
					rest = append(rest, l)
				} else if e.Action == "fail" {
					fmt.Fprint(out, l.text)
				}
			}
			held[e.Package] = rest
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
