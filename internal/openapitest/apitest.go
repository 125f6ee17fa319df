// Package openapitest checks HTTP exchanges against the shop's OpenAPI document,
// so a handler that drifts from openapi.yaml fails its tests. It is used by
// in-process handler tests (app.Test) and by e2e/ alike.
package openapitest

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/gofiber/fiber/v2"

	"github.com/shop-oss/shop/openapi"
)

var (
	once   sync.Once
	doc    *openapi3.T
	router routers.Router
	err    error
)

// Spec loads and validates openapi.yaml once per test binary.
func Spec(t testing.TB) (*openapi3.T, routers.Router) {
	t.Helper()
	once.Do(func() {
		for _, ct := range []string{"application/yaml", "text/event-stream", "text/html", "text/css", "text/javascript", "image/svg+xml", "image/png", "image/jpeg", "image/webp"} {
			openapi3filter.RegisterBodyDecoder(ct, openapi3filter.PlainBodyDecoder)
		}
		loader := openapi3.NewLoader()
		doc, err = loader.LoadFromData(openapi.Spec)
		if err != nil {
			return
		}
		if err = doc.Validate(context.Background()); err != nil {
			return
		}
		// Match requests on any host: tests listen on random ports.
		doc.Servers = nil
		router, err = gorillamux.NewRouter(doc)
	})
	if err != nil {
		t.Fatalf("openapi.yaml: %v", err)
	}
	return doc, router
}

// Check validates one exchange: the request must match a documented
// operation and the response (status, headers, body) its documentation.
// reqBody and respBody are the raw bodies (the readers are consumed).
func Check(t testing.TB, req *http.Request, reqBody []byte, resp *http.Response, respBody []byte) {
	t.Helper()
	_, r := Spec(t)
	ctx := context.Background()
	req = req.Clone(ctx)
	req.Body = io.NopCloser(bytes.NewReader(reqBody))
	route, params, ferr := r.FindRoute(req)
	if ferr != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed) {
		// An undocumented route or method, asked on purpose: it must still
		// be answered with a problem document.
		if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
			t.Errorf("%s %s → %d with Content-Type %q, want a problem document", req.Method, req.URL.Path, resp.StatusCode, ct)
		}
		return
	}
	if ferr != nil {
		t.Errorf("openapi: %s %s is not documented: %v", req.Method, req.URL.Path, ferr)
		return
	}
	in := &openapi3filter.RequestValidationInput{
		Request:    req,
		PathParams: params,
		Route:      route,
		Options: &openapi3filter.Options{
			AuthenticationFunc: openapi3filter.NoopAuthenticationFunc,
			// Bad requests are sent on purpose; only responses must conform.
			ExcludeRequestBody: true,
			MultiError:         true,
		},
	}
	out := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: in,
		Status:                 resp.StatusCode,
		Header:                 resp.Header,
		Body:                   io.NopCloser(bytes.NewReader(respBody)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if verr := openapi3filter.ValidateResponse(ctx, out); verr != nil {
		t.Errorf("openapi: %s %s → %d does not match openapi.yaml: %v\nbody: %s",
			req.Method, req.URL.Path, resp.StatusCode, verr, respBody)
	}
}

// Reply is one answer of an in-process request.
type Reply struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body as a JSON object, failing t if it is not one.
func (r Reply) JSON(t testing.TB) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(r.Body, &m); err != nil {
		t.Fatalf("%d %s: %v", r.Status, r.Body, err)
	}
	return m
}

// Decode decodes the body into v, failing t unless the status is status.
func (r Reply) Decode(t testing.TB, status int, v any) {
	t.Helper()
	if r.Status != status {
		t.Fatalf("got %d %s, want %d", r.Status, r.Body, status)
	}
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("%s: %v", r.Body, err)
	}
}

// Do sends one request through app (in-process, app.Test), with a bearer
// token when token is not empty and headers as name, value pairs, and
// checks the exchange against openapi.yaml.
func Do(t testing.TB, app *fiber.App, method, path, token, body string, headers ...string) Reply {
	t.Helper()
	req := httptest.NewRequest(method, path, strings.NewReader(body))
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := app.Test(req, -1)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	out, _ := io.ReadAll(resp.Body)
	Check(t, req, []byte(body), resp, out)
	return Reply{resp.StatusCode, resp.Header, out}
}

// WantProblem fails t unless r is a problem document with status and code.
// It also holds every such answer to the headers docs/api.md promises with it:
// a 401 carries WWW-Authenticate: Bearer, a 503 or 429 a Retry-After.
func WantProblem(t testing.TB, r Reply, status int, code string) {
	t.Helper()
	if r.Status != status || r.Header.Get("Content-Type") != "application/problem+json" ||
		!bytes.Contains(r.Body, []byte(`"code":"`+code+`"`)) {
		t.Fatalf("got %d %s, want %d %s", r.Status, r.Body, status, code)
	}
	switch {
	case status == http.StatusUnauthorized && !strings.HasPrefix(r.Header.Get("WWW-Authenticate"), "Bearer"):
		t.Fatalf("401 without WWW-Authenticate: Bearer: %s", r.Body)
	case (status == http.StatusServiceUnavailable || status == http.StatusTooManyRequests) && r.Header.Get("Retry-After") == "":
		t.Fatalf("%d without Retry-After: %s", status, r.Body)
	}
}

// WantInvalid fails t unless r is a 400 invalid_request problem whose
// errors name fields, in that order.
func WantInvalid(t testing.TB, r Reply, fields []string) {
	t.Helper()
	WantProblem(t, r, http.StatusBadRequest, "invalid_request")
	var p struct{ Errors []struct{ Field string } }
	if err := json.Unmarshal(r.Body, &p); err != nil {
		t.Fatalf("problem %s: %v", r.Body, err)
	}
	got := make([]string, 0, len(p.Errors))
	for _, e := range p.Errors {
		got = append(got, e.Field)
	}
	if !slices.Equal(got, fields) {
		t.Fatalf("fields %v, want %v: %s", got, fields, r.Body)
	}
}

// WantSound fails t unless r is what any request, however malformed, may
// get: never a 5xx, and every 4xx a problem document with a code. Fuzz
// targets check it on every input.
func WantSound(t testing.TB, r Reply) {
	t.Helper()
	if r.Status >= 500 {
		t.Fatalf("got %d %s", r.Status, r.Body)
	}
	if r.Status >= 400 && (r.Header.Get("Content-Type") != "application/problem+json" || !bytes.Contains(r.Body, []byte(`"code":"`))) {
		t.Fatalf("got %d with Content-Type %q: %s, want a problem document", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
}
