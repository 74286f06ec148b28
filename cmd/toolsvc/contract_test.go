package main

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/legacy"
)

// The contract is api/openapi.yaml; every response the end-to-end tests see
// is checked against it.
var contract struct {
	once   sync.Once
	router routers.Router
	err    error
}

func loadContract() (routers.Router, error) {
	contract.once.Do(func() {
		loader := openapi3.NewLoader()
		doc, err := loader.LoadFromFile(filepath.Join("..", "..", "api", "openapi.yaml"))
		if err != nil {
			contract.err = err
			return
		}
		if err := doc.Validate(context.Background()); err != nil {
			contract.err = err
			return
		}
		contract.router, contract.err = legacy.NewRouter(doc)
		// kin-openapi decodes text/plain but not text/html (GET / for a
		// browser): the body is a string, checked against the schema as one.
		openapi3filter.RegisterBodyDecoder("text/html", func(body io.Reader, _ http.Header, _ *openapi3.SchemaRef, _ openapi3filter.EncodingFn) (any, error) {
			b, err := io.ReadAll(body)
			return string(b), err
		})
	})
	return contract.router, contract.err
}

func TestOpenAPIDocumentIsValid(t *testing.T) {
	t.Parallel()
	if _, err := loadContract(); err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
}

// checkContract fails the test when a live response does not match the
// OpenAPI document: unknown route, undocumented status, or a body that does
// not fit the schema. Streamed (event-stream) bodies are checked by the
// streaming tests themselves.
func checkContract(t testing.TB, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	router, err := loadContract()
	if err != nil {
		t.Fatalf("api/openapi.yaml: %v", err)
	}
	// Match on the path only: the test server's host is not in the document.
	r := req.Clone(context.Background())
	r.URL.Scheme, r.URL.Host, r.Host = "", "", ""
	if resp.StatusCode == http.StatusMethodNotAllowed && resp.Header.Get("Allow") == "" {
		t.Errorf("contract: %s %s -> 405 without an Allow header", req.Method, req.URL.Path)
	}
	if req.Method == http.MethodHead {
		// HEAD is answered as GET, without a body (see the document's
		// description): the GET operation must have the status.
		r.Method = http.MethodGet
		if len(body) != 0 {
			t.Errorf("contract: HEAD %s -> %d with a body of %d bytes", req.URL.Path, resp.StatusCode, len(body))
		}
		if route, _, err := router.FindRoute(r); err == nil && route.Operation.Responses.Status(resp.StatusCode) == nil {
			t.Errorf("contract: HEAD %s -> %d, a status GET does not document", req.URL.Path, resp.StatusCode)
		}
		return
	}
	route, params, err := router.FindRoute(r)
	if err != nil && (resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusForbidden) {
		// Routes that do not exist answer with the documented error body,
		// and so does a browser's request refused on any path.
		var e struct {
			Error struct{ Code, Message string }
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Code == "" || e.Error.Message == "" {
			t.Errorf("contract: %s %s -> %d: body is not an HTTPError: %s", req.Method, req.URL.Path, resp.StatusCode, body)
		}
		return
	}
	if err != nil {
		t.Errorf("contract: %s %s is not in api/openapi.yaml: %v", req.Method, req.URL.Path, err)
		return
	}
	if strings.HasPrefix(resp.Header.Get("Content-Type"), "text/event-stream") {
		return
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{
			Request: r, PathParams: params, Route: route,
			Options: &openapi3filter.Options{AuthenticationFunc: openapi3filter.NoopAuthenticationFunc},
		},
		Status: resp.StatusCode,
		Header: resp.Header,
		Body:   io.NopCloser(bytes.NewReader(body)),
		Options: &openapi3filter.Options{
			IncludeResponseStatus: true,
			MultiError:            true,
		},
	}
	if err := openapi3filter.ValidateResponse(context.Background(), in); err != nil {
		t.Errorf("contract: %s %s -> %d does not match api/openapi.yaml: %v\nbody: %.500s", req.Method, req.URL.Path, resp.StatusCode, err, body)
	}
}
