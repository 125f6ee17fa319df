package testenv

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// A port that another server took before stripe-mock bound it answers,
// but not as stripe-mock: the start goes on to another port instead of
// handing the test that server.
func TestStripeMockIsNotAnotherServer(t *testing.T) {
	t.Parallel()
	other := httptest.NewServer(http.NotFoundHandler())
	defer other.Close()
	if answers(other.Listener.Addr().String(), make(chan struct{})) {
		t.Fatal("a server answering 404 passed for stripe-mock")
	}
	mock := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte(`{"object":"list","data":[]}`))
	}))
	defer mock.Close()
	if !answers(mock.Listener.Addr().String(), make(chan struct{})) {
		t.Fatal("a server answering as stripe-mock does was not taken for one")
	}
}
