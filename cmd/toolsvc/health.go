package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"
)

// health asks the service at TOOLSVC_ADDR whether it is alive: GET
// /healthz, which needs no key. It returns nil when the answer is 200 with
// {"status":"ok"}, and an error saying what it got otherwise, so a
// container's HEALTHCHECK needs neither curl nor a shell. A wildcard
// listening address (0.0.0.0, [::], or no host) is asked on loopback, where
// a service listening on every interface also answers.
func health(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolsvc health", flag.ContinueOnError)
	fs.SetOutput(stderr)
	timeout := fs.Duration("timeout", 5*time.Second, "how long to wait for the answer")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintln(w, "usage: toolsvc health [-timeout 5s]\n\nGET /healthz of the service at TOOLSVC_ADDR (default 127.0.0.1:8080) and exit 0 when it answers ok, 1 otherwise.")
		fs.PrintDefaults()
	}
	fs.Usage = func() {} // written below: to stdout when asked for, else to stderr
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			usage(stdout)
		} else {
			usage(stderr)
		}
		return err
	}
	if fs.NArg() > 0 {
		usage(stderr)
		return fmt.Errorf("health: unexpected argument %q", fs.Arg(0))
	}
	addr := getenv("TOOLSVC_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	url, err := localURL(addr, "/healthz")
	if err != nil {
		return fmt.Errorf("health: TOOLSVC_ADDR: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	// No proxy: the question is about this machine's service.
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("health: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if err != nil {
		return fmt.Errorf("health: reading the answer of %s: %w", url, err)
	}
	var h struct{ Status, Version string }
	if resp.StatusCode != http.StatusOK || json.Unmarshal(body, &h) != nil || h.Status != "ok" {
		return fmt.Errorf("health: %s answered %s: %.200s", url, resp.Status, body)
	}
	_, err = fmt.Fprintf(stdout, "ok %s %s\n", url, h.Version)
	return err
}

// localURL is the URL of path on a service listening on addr, asked on
// this machine.
func localURL(addr, path string) (string, error) {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return "", err
	}
	if ip := net.ParseIP(host); host == "" || (ip != nil && ip.IsUnspecified()) {
		host = "127.0.0.1"
		if ip != nil && ip.To4() == nil {
			host = "::1"
		}
	}
	return "http://" + net.JoinHostPort(host, port) + path, nil
}
