package e2e

import (
	"context"
	"io"
	"net/http"
	"testing"

	"github.com/shop-oss/shop/internal/openapitest"
)

// streamAnswer opens an event stream and returns its status and headers
// (checked against openapi.yaml) without waiting for a body that never
// ends; an error answer's body is read whole.
func streamAnswer(t *testing.T, url string, headers ...string) response {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := httpClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	var body []byte
	if resp.StatusCode != http.StatusOK {
		body, _ = io.ReadAll(resp.Body)
	}
	openapitest.Check(t, req, nil, resp, body)
	return response{resp.StatusCode, resp.Header, body}
}

// stream opens a live stock stream of sku on the server at base.
func stream(t *testing.T, base, sku string) *openapitest.Stream {
	t.Helper()
	return openapitest.OpenStream(t, streamClient, base+"/api/v1/products/"+sku+"/events")
}

// streamClient has no overall timeout: a stream lasts as long as the test
// wants. Each stream is its own connection.
var streamClient = &http.Client{Transport: &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: 1, DisableKeepAlives: true}}
