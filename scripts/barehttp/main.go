// Command barehttp is the ceiling toolsvc's HTTP figures are compared with:
// a bare net/http handler, no router, validation or audit, that reads the
// file named in a POSTed {"path": ...} and returns it as JSON.
//
//	go run ./scripts/barehttp -addr 127.0.0.1:18081 -root DIR
package main

import (
	"encoding/json"
	"flag"
	"log"
	"net/http"
	"os"
	"path/filepath"
)

func main() {
	addr := flag.String("addr", "127.0.0.1:18081", "listen address")
	root := flag.String("root", ".", "folder the paths are relative to")
	flag.Parse()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		var req struct {
			Path string `json:"path"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, err.Error(), 400)
			return
		}
		data, err := os.ReadFile(filepath.Join(*root, req.Path))
		if err != nil {
			http.Error(w, err.Error(), 404)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]string{"result": string(data)})
	})
	log.Fatal(http.ListenAndServe(*addr, nil))
}
