package loadtest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
)

// client makes the setup and verification calls: plain JSON requests, not
// part of what is measured.
type client struct {
	t    target
	http *http.Client
	// forwardedFor, when set, makes as() give requests an X-Forwarded-For
	// address (Config.ForwardedFor); from is this client's.
	forwardedFor bool
	from         string
}

func newClient(t target, timeout time.Duration, forwardedFor bool) *client {
	return &client{t: t, http: &http.Client{Transport: t.transport(64), Timeout: timeout}, forwardedFor: forwardedFor}
}

// as is c sending its requests from addr (as X-Forwarded-For) when the run
// forwards addresses, else c: with --forwarded-for every request of a
// shopper, sign-up and login included, is counted against its own address
// by a server that trusts this host as a proxy, never against this host's.
func (c *client) as(addr string) *client {
	if !c.forwardedFor {
		return c
	}
	cp := *c
	cp.from = addr
	return &cp
}

// apiError is a non-2xx answer, with the problem document's code.
type apiError struct {
	Method, Path string
	Status       int
	Code         string
	Detail       string
	RetryAfter   time.Duration
}

func (e *apiError) Error() string {
	msg := fmt.Sprintf("%s %s: %d", e.Method, e.Path, e.Status)
	if e.Code != "" {
		msg += " " + e.Code
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// problem is the part of an RFC 9457 problem document we read.
type problem struct {
	Code   string `json:"code"`
	Detail string `json:"detail"`
}

// maxAnswer caps what is read of one answer.
const maxAnswer = 1 << 20

// do sends in as JSON (when not nil) with the bearer token (when set) and
// decodes a 2xx answer into out (when not nil). A non-2xx answer is an
// *apiError.
func (c *client) do(ctx context.Context, method, path, token string, in, out any) error {
	var body io.Reader
	if in != nil {
		raw, err := json.Marshal(in)
		if err != nil {
			return fmt.Errorf("%s %s: %w", method, path, err)
		}
		body = bytes.NewReader(raw)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.t.url(path), body)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	if in != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	if c.from != "" {
		req.Header.Set("X-Forwarded-For", c.from)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return fmt.Errorf("%s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxAnswer))
	if err != nil {
		return fmt.Errorf("%s %s: read answer: %w", method, path, err)
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return answerError(method, path, resp, raw)
	}
	if out != nil {
		if err := json.Unmarshal(raw, out); err != nil {
			return fmt.Errorf("%s %s: decode answer: %w", method, path, err)
		}
	}
	return nil
}

func answerError(method, path string, resp *http.Response, raw []byte) *apiError {
	var p problem
	_ = json.Unmarshal(raw, &p) // not a problem document: status only
	e := &apiError{Method: method, Path: path, Status: resp.StatusCode, Code: p.Code, Detail: p.Detail}
	if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s >= 0 {
		e.RetryAfter = time.Duration(s) * time.Second
	}
	return e
}

// retrying calls f until it succeeds, fails for good, or attempts run out.
// Only 503s are retried (the server sheds argon2 work with 503 when many
// logins queue up), after their Retry-After. A 429 is never retried: the
// server's rate limit has to be raised for a load test.
func retrying(ctx context.Context, f func() error) error {
	return explainLimited(retryOn(ctx, f, http.StatusServiceUnavailable))
}

// retryOn calls f until it succeeds, answers a status not in statuses, or
// attempts run out, waiting out each answer's Retry-After (at least a
// doubling backoff from 200 ms).
func retryOn(ctx context.Context, f func() error, statuses ...int) error {
	const attempts = 6
	var err error
	for i := range attempts {
		if err = f(); err == nil {
			return nil
		}
		var ae *apiError
		if !errors.As(err, &ae) || !slices.Contains(statuses, ae.Status) || i == attempts-1 {
			break
		}
		wait := max(ae.RetryAfter, 200*time.Millisecond<<i)
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(wait):
		}
	}
	return err
}

// explainLimited adds what to do to a 429.
func explainLimited(err error) error {
	var ae *apiError
	if errors.As(err, &ae) && ae.Status == http.StatusTooManyRequests {
		return fmt.Errorf("%w (the server rate-limits this client: run it with SHOP_RATE_LIMIT=0 or a high limit for a load test, "+
			"or give --forwarded-for to a server with SHOP_TRUSTED_PROXIES=127.0.0.1)", err)
	}
	return err
}
