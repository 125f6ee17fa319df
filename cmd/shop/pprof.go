package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"time"
)

// servePprof exposes the Go profiler on its own listener, never on the
// API's: profiles show internals and cost CPU, so only an operator who
// asks for them (`shop serve --pprof-addr 127.0.0.1:6060`) gets them. It
// returns a stop function.
func servePprof(addr string, log *slog.Logger) (func(), error) {
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return serveSide("pprof", "--pprof-addr", addr, mux, log)
}

// serveSide runs an operator-only HTTP server (profiles, a writer's
// metrics) beside the main work and returns a function that stops it.
// No write timeout: a CPU profile or trace streams for its ?seconds=.
func serveSide(name, flag, addr string, h http.Handler, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("listen on %s %s: %w", flag, addr, err)
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Warn(name+" server", "err", err)
		}
	}()
	log.Info(name+" listening", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}, nil
}
