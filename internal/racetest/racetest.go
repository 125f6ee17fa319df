// Package racetest runs the callers of a race test: each in a goroutine of
// its own, all released at once, so that they meet in the code under test
// instead of arriving one after another as they were started.
package racetest

import "sync"

// Together runs every op in a goroutine of its own, all released at once,
// and waits for them all.
func Together(ops ...func()) { Start(ops...)() }

// Start is Together for a caller with work of its own to do while the ops
// run: it releases them and returns at once; wait waits for them all.
func Start(ops ...func()) (wait func()) {
	start := make(chan struct{})
	var wg sync.WaitGroup
	for _, op := range ops {
		wg.Go(func() {
			<-start
			op()
		})
	}
	close(start)
	return wg.Wait
}

// Times is n callers of op, each told its number from 0, for Together or
// Start.
func Times(n int, op func(i int)) []func() {
	ops := make([]func(), n)
	for i := range ops {
		ops[i] = func() { op(i) }
	}
	return ops
}
