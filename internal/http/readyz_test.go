package http

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
)

func TestReadyzReportsChecks(t *testing.T) {
	checks := map[string]string{"workspace": "ok", "data_dir": "ok"}
	ok := true
	srv, _ := newTestServer(t, Options{Ready: func() (bool, map[string]string) { return ok, checks }})
	get := func() (int, readyBody) {
		resp, err := http.Get(srv.URL + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var b readyBody
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		return resp.StatusCode, b
	}
	if code, b := get(); code != 200 || b.Status != "ready" || b.Checks["workspace"] != "ok" || b.Error != nil {
		t.Fatalf("ready: %d %+v", code, b)
	}
	ok = false
	checks = map[string]string{"workspace": "ok", "data_dir": "not writable: read-only file system", "free_space": "below the minimum"}
	code, b := get()
	if code != 503 || b.Status != "not_ready" || b.Error == nil || b.Error.Code != "not_ready" ||
		b.Error.Message != "not ready: data_dir: not writable: read-only file system; free_space: below the minimum" {
		t.Fatalf("not ready: %d %+v %+v", code, b, b.Error)
	}
}

// TestReadyzInFlightOnlyOnLoopback: the count of running calls, which the
// drain command reads, is given to callers on the service's machine only.
func TestReadyzInFlightOnlyOnLoopback(t *testing.T) {
	srv, _ := newTestServer(t, Options{})
	h := srv.Config.Handler
	for _, tc := range []struct {
		remote string
		want   bool
	}{
		{"127.0.0.1:40000", true},
		{"[::1]:40000", true},
		{"192.0.2.7:40000", false},
		{"10.1.2.3:40000", false},
		{"garbage", false},
	} {
		req := httptest.NewRequest(http.MethodGet, "http://localhost/readyz", nil)
		req.RemoteAddr = tc.remote
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		var b readyBody
		if err := json.Unmarshal(rec.Body.Bytes(), &b); err != nil || rec.Code != http.StatusOK {
			t.Fatalf("%s: %d %s", tc.remote, rec.Code, rec.Body)
		}
		if got := b.InFlight != nil; got != tc.want || (got && *b.InFlight != 0) {
			t.Errorf("%s: in_flight %v; want given=%v (0)", tc.remote, b.InFlight, tc.want)
		}
	}
}
