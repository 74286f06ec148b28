package http

import (
	"encoding/json"
	"net/http"
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
