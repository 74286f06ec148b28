package mcpmount

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// fakeVar names the variable that makes the test binary a fake MCP stdio
// server instead of running tests (see TestMain): a server whose every
// misbehaviour is chosen by the test.
const fakeVar = "MCPMOUNT_FAKE"

// runFake is the fake server. Modes:
//
//	exit     writes a line to stderr and exits with status 3 at once
//	hang     reads stdin and never answers
//	garbage  writes a banner that is not JSON-RPC to stdout, then hangs
//	raw      a hand-written MCP server (below)
//	npmnet   prints what npx prints without a network, and exits 1
//	pipnet   prints what pip prints without a network, and exits 1
//	npxhalf  as npx cut short in an install: see npxHalf
func runFake(mode string) {
	switch mode {
	case "npxhalf":
		npxHalf()
	case "npmnet":
		fmt.Fprintln(os.Stderr, "npm error code EAI_AGAIN")
		fmt.Fprintln(os.Stderr, "npm error syscall getaddrinfo")
		fmt.Fprintln(os.Stderr, "npm error request to https://registry.npmjs.org/@modelcontextprotocol%2fserver-filesystem failed, reason: getaddrinfo EAI_AGAIN registry.npmjs.org")
		os.Exit(1)
	case "pipnet":
		fmt.Fprintln(os.Stderr, "WARNING: Retrying (Retry(total=0, connect=None, read=None, redirect=None, status=None)) after connection broken by 'NewConnectionError('<pip._vendor.urllib3.connection.HTTPSConnection object at 0x7f>: Failed to establish a new connection: [Errno -3] Temporary failure in name resolution')': /simple/mcp-server-fetch/")
		fmt.Fprintln(os.Stderr, "ERROR: Could not find a version that satisfies the requirement mcp-server-fetch")
		os.Exit(1)
	case "exit":
		fmt.Fprintln(os.Stderr, "boom: the config file /nonexistent is missing")
		os.Exit(3)
	case "hang":
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {}
	case "garbage":
		fmt.Println("Welcome to my server v1.0! Listening on stdio...")
		_, _ = io.Copy(io.Discard, os.Stdin)
		select {}
	case "raw":
		rawServer(os.Stdin, os.Stdout)
		os.Exit(0)
	}
	fmt.Fprintln(os.Stderr, "unknown fake mode", mode)
	os.Exit(2)
}

// npxHalf acts as npx does when it is cut short in an install: it finds
// or leaves a half-made install in $npm_config_cache/_npx, notes which
// ("found" or "fresh") as a line of $FAKE_WS/attempts, and then never
// answers (or, with FAKE_EXIT set, exits 1, as npm does after a failed
// install it rolled back).
func npxHalf() {
	half := filepath.Join(os.Getenv("npm_config_cache"), "_npx", "1234abcd", "node_modules", "pkg")
	seen := "fresh"
	if _, err := os.Stat(half); err == nil {
		seen = "found"
	}
	if err := os.MkdirAll(half, 0o700); err != nil {
		seen = "error " + err.Error()
	}
	f, err := os.OpenFile(filepath.Join(os.Getenv("FAKE_WS"), "attempts"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintln(f, seen)
		f.Close()
	}
	if os.Getenv("FAKE_EXIT") != "" {
		os.Exit(1)
	}
	_, _ = io.Copy(io.Discard, os.Stdin)
	select {}
}

// rawServer speaks newline-delimited JSON-RPC by hand, so that it can
// send what a real SDK would refuse to: invalid schemas, odd names, a
// 100 MB result written without holding it in memory. Tools:
//
//	echo      returns its "text" argument (and the value of $FAKE_SECRET if "secret" is true)
//	fail      returns isError with a message
//	huge      streams a text result of "mb" MiB
//	slow      sends one progress notification (when asked) and never answers
//	change    answers, then adds the tool "added" and sends list_changed
//	picture   returns a 1x1 PNG image and an embedded text resource
//	count     returns how many times it was called in this process
//	freeze    stops reading its stdin and answering anything, for good
func rawServer(in io.Reader, out io.Writer) {
	w := bufio.NewWriter(out)
	send := func(v any) {
		b, _ := json.Marshal(v)
		w.Write(b)
		w.WriteByte('\n')
		w.Flush()
	}
	added := false
	count := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		var req struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				Name      string         `json:"name"`
				Arguments map[string]any `json:"arguments"`
				Meta      map[string]any `json:"_meta"`
			} `json:"params"`
		}
		if json.Unmarshal(sc.Bytes(), &req) != nil || req.ID == nil {
			continue // notifications
		}
		reply := func(result any) { send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "result": result}) }
		text := func(s string, isErr bool) map[string]any {
			return map[string]any{"content": []any{map[string]any{"type": "text", "text": s}}, "isError": isErr}
		}
		switch req.Method {
		case "initialize":
			reply(map[string]any{"protocolVersion": "2025-06-18", "capabilities": map[string]any{"tools": map[string]any{"listChanged": true}},
				"serverInfo": map[string]any{"name": "fake", "version": "1"}})
		case "ping":
			reply(map[string]any{})
		case "tools/list":
			obj := func(props string) json.RawMessage {
				return json.RawMessage(`{"type":"object","properties":` + props + `}`)
			}
			tools := []any{
				map[string]any{"name": "echo", "description": "Echo the text.", "inputSchema": obj(`{"text":{"type":"string"},"secret":{"type":"boolean"}}`)},
				map[string]any{"name": "fail", "inputSchema": obj(`{}`)},
				map[string]any{"name": "probe", "inputSchema": obj(`{"read":{"type":"string"},"write":{"type":"string"},"dial":{"type":"string"}}`)},
				map[string]any{"name": "huge", "inputSchema": obj(`{"mb":{"type":"integer"}}`)},
				map[string]any{"name": "slow", "inputSchema": obj(`{}`)},
				map[string]any{"name": "change", "inputSchema": obj(`{}`)},
				map[string]any{"name": "picture", "inputSchema": obj(`{}`)},
				map[string]any{"name": "count", "inputSchema": obj(`{}`)},
				map[string]any{"name": "freeze", "inputSchema": obj(`{}`)},
				// A property with a default that is also required, as
				// Playwright MCP's "scale".
				map[string]any{"name": "shot", "inputSchema": json.RawMessage(`{"type":"object","properties":{"scale":{"type":"string","enum":["css","device"],"default":"css"},"name":{"type":"string"},"opts":{"type":"object","properties":{"q":{"type":"integer","default":80},"r":{"type":"integer"}},"required":["q","r"]}},"required":["scale","name"]}`)},
				// No type: normalized to an object schema.
				map[string]any{"name": "untyped", "inputSchema": json.RawMessage(`{"properties":{"n":{"type":"integer"}}}`)},
				// Characters no model format accepts, and a name too long.
				map[string]any{"name": "dotted.name/with space", "inputSchema": obj(`{}`)},
				map[string]any{"name": strings.Repeat("very_long_tool_name_", 5), "inputSchema": obj(`{}`)},
				// Unusable schemas: left out, the rest stays.
				map[string]any{"name": "string_schema", "inputSchema": json.RawMessage(`{"type":"string"}`)},
				map[string]any{"name": "broken_schema", "inputSchema": json.RawMessage(`{"type":"object","properties":{"a":{"type":"no-such-type"}}}`)},
				map[string]any{"name": "remote_ref", "inputSchema": json.RawMessage(`{"type":"object","properties":{"a":{"$ref":"http://169.254.169.254/schema.json"}}}`)},
			}
			if added {
				tools = append(tools, map[string]any{"name": "added", "inputSchema": obj(`{}`)})
			}
			reply(map[string]any{"tools": tools})
		case "tools/call":
			a := req.Params.Arguments
			switch req.Params.Name {
			case "echo":
				s, _ := a["text"].(string)
				if sec, _ := a["secret"].(bool); sec {
					s += " " + os.Getenv("FAKE_SECRET")
				}
				reply(text(s, false))
			case "probe":
				// What the sandbox lets it do: read a file, connect to an
				// address, and where it runs.
				var out []string
				if p, _ := a["read"].(string); p != "" {
					if b, err := os.ReadFile(p); err != nil {
						out = append(out, "read: "+err.Error())
					} else {
						out = append(out, "read: "+string(b))
					}
				}
				if p, _ := a["write"].(string); p != "" {
					if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
						out = append(out, "write: "+err.Error())
					} else if err := os.WriteFile(p, []byte("WRITTEN"), 0o600); err != nil {
						out = append(out, "write: "+err.Error())
					} else {
						out = append(out, "write: ok")
					}
				}
				if addr, _ := a["dial"].(string); addr != "" {
					if c, err := net.Dial("tcp", addr); err != nil {
						out = append(out, "dial: "+err.Error())
					} else {
						c.Close()
						out = append(out, "dial: connected")
					}
				}
				wd, _ := os.Getwd()
				out = append(out, "cwd: "+wd, "home: "+os.Getenv("HOME"), "service secret: "+os.Getenv("SERVICE_SECRET"),
					"ws: "+os.Getenv("FAKE_WS"), fmt.Sprintf("pid: %d", os.Getpid()))
				for _, v := range []string{"npm_config_cache", "XDG_CACHE_HOME", "BUN_INSTALL_CACHE_DIR"} {
					out = append(out, v+": "+os.Getenv(v))
				}
				reply(text(strings.Join(out, "\n"), false))
			case "fail":
				reply(text("the widget is broken", true))
			case "count":
				count++
				reply(text(fmt.Sprint(count), false))
			case "freeze":
				// Neither answers nor reads again: a server stuck for good.
				time.Sleep(time.Hour)
			case "shot":
				b, _ := json.Marshal(a)
				reply(text(string(b), false))
			case "huge":
				mb, _ := a["mb"].(float64)
				// Written in pieces: the server never holds it whole.
				fmt.Fprintf(w, `{"jsonrpc":"2.0","id":%s,"result":{"content":[{"type":"text","text":"`, req.ID)
				chunk := strings.Repeat("x", 1<<20)
				for range int(mb) {
					if _, err := w.WriteString(chunk); err != nil {
						os.Exit(1)
					}
				}
				w.WriteString(`"}]}}` + "\n")
				if w.Flush() != nil {
					os.Exit(1)
				}
			case "slow":
				if tok, ok := req.Params.Meta["progressToken"]; ok {
					send(map[string]any{"jsonrpc": "2.0", "method": "notifications/progress", "params": map[string]any{"progressToken": tok, "progress": 1, "total": 2, "message": "started"}})
				}
			case "change":
				added = true
				reply(text("changed", false))
				send(map[string]any{"jsonrpc": "2.0", "method": "notifications/tools/list_changed"})
			case "picture":
				reply(map[string]any{"content": []any{
					map[string]any{"type": "text", "text": "here it is"},
					map[string]any{"type": "image", "mimeType": "image/png", "data": tinyPNG},
					map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///notes/readme.md", "mimeType": "text/markdown", "text": "# Notes\n"}},
				}})
			default:
				send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32602, "message": "unknown tool " + req.Params.Name}})
			}
		default:
			send(map[string]any{"jsonrpc": "2.0", "id": req.ID, "error": map[string]any{"code": -32601, "message": "method not found"}})
		}
	}
	time.Sleep(10 * time.Millisecond)
}

// tinyPNG is a 1x1 PNG, base64.
const tinyPNG = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9awAAAABJRU5ErkJggg=="
