// Command barehttp is the ceiling toolsvc's HTTP figures are compared with:
// a bare net/http handler, no router, validation or audit, that reads the
// file named in a POSTed {"path": ...} and returns it as JSON.
//
// With -files DIR it also writes one small JSON file per request under
// DIR/YYYY-MM-DD/, the way the audit log writes its records (an unnamed
// file linked into place): the floor of any log that keeps a file per
// call, which toolsvc with its audit log on is compared with.
//
// With -timeouts the server has the timeouts cmd/toolsvc's has (each sets
// a deadline on the connection per request), to tell their cost apart.
//
//	go run ./scripts/barehttp -addr 127.0.0.1:18081 -root DIR [-files DIR] [-timeouts]
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	root := flag.String("root", ".", "folder the paths are relative to")
	files := flag.String("files", "", "write one small file per request under this folder")
	timeouts := flag.Bool("timeouts", false, "set the server timeouts toolsvc sets")
	flag.Parse()
	var w *fileWriter
	if *files != "" {
		var err error
		if w, err = newFileWriter(*files); err != nil {
			log.Fatal(err)
		}
	}
	http.HandleFunc("/", func(rw http.ResponseWriter, r *http.Request) {
		start := time.Now()
		var req struct {
			Path string `json:"path"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(rw, err.Error(), 400)
			return
		}
		data, err := os.ReadFile(filepath.Join(*root, req.Path))
		if err != nil {
			http.Error(rw, err.Error(), 404)
			return
		}
		if w != nil {
			rec, _ := json.Marshal(map[string]any{"tool_name": "read_file", "arguments": req, "timestamp": start.UTC(),
				"status": "success", "result": string(data), "duration_ms": time.Since(start).Milliseconds()})
			if err := w.write(start, append(rec, '\n')); err != nil {
				http.Error(rw, err.Error(), 500)
				return
			}
		}
		rw.Header().Set("Content-Type", "application/json")
		json.NewEncoder(rw).Encode(map[string]string{"result": string(data)})
	})
	srv := &http.Server{Addr: *addr}
	if *timeouts {
		srv.ReadHeaderTimeout = 10 * time.Second
		srv.ReadTimeout = 2 * time.Minute
		srv.WriteTimeout = time.Minute
		srv.IdleTimeout = 2 * time.Minute
		srv.MaxHeaderBytes = 64 << 10
	}
	log.Fatal(srv.ListenAndServe())
}
