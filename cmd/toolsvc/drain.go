package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// drain waits until the service at TOOLSVC_ADDR runs no tool call, for a
// container's pre-stop hook: Kubernetes runs the hook, then sends SIGTERM,
// which cancels the calls still running. The hook first waits -settle, the
// time load balancers take to stop sending new calls to a terminating pod,
// then asks GET /readyz, whose in_flight count the service gives to callers
// on its own machine, until it is 0. It gives up after -timeout (keep it
// below the pod's termination grace period) and exits 1 then, which
// Kubernetes records as an event before it stops the container anyway.
func drain(ctx context.Context, args []string, getenv func(string) string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("toolsvc drain", flag.ContinueOnError)
	fs.SetOutput(stderr)
	settle := fs.Duration("settle", 5*time.Second, "how long to wait before the first look: the time load balancers take to stop sending calls")
	timeout := fs.Duration("timeout", 50*time.Second, "how long to wait in all")
	poll := fs.Duration("poll", 250*time.Millisecond, "how often to ask")
	usage := func(w io.Writer) {
		fs.SetOutput(w)
		fmt.Fprintln(w, "usage: toolsvc drain [-settle 5s] [-timeout 50s]\n\nWait until the service at TOOLSVC_ADDR (default 127.0.0.1:8080) runs no tool call,\nfor a pre-stop hook; exit 0 when it runs none, 1 when -timeout passes first.")
		fs.PrintDefaults()
	}
	fs.Usage = func() {}
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
		return fmt.Errorf("drain: unexpected argument %q", fs.Arg(0))
	}
	if *poll <= 0 {
		return errors.New("drain: -poll must be positive")
	}
	addr := getenv("TOOLSVC_ADDR")
	if addr == "" {
		addr = "127.0.0.1:8080"
	}
	url, err := localURL(addr, "/readyz")
	if err != nil {
		return fmt.Errorf("drain: TOOLSVC_ADDR: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	if err := sleep(ctx, *settle); err != nil {
		return fmt.Errorf("drain: %s passed while settling", *timeout)
	}
	client := &http.Client{Transport: &http.Transport{Proxy: nil}}
	last := "no answer yet"
	for {
		n, err := inFlight(ctx, client, url)
		switch {
		case err == nil && n == 0:
			_, err = fmt.Fprintf(stdout, "drained: no call running at %s\n", url)
			return err
		case err == nil:
			last = fmt.Sprintf("%d calls running", n)
		case ctx.Err() == nil && isRefused(err):
			// Nothing listens: nothing runs.
			_, err = fmt.Fprintf(stdout, "drained: nothing listens at %s\n", url)
			return err
		default:
			last = err.Error()
		}
		if sleep(ctx, *poll) != nil {
			return fmt.Errorf("drain: still not drained after %s: %s", *timeout, last)
		}
	}
}

// inFlight asks url (a /readyz) how many calls run.
func inFlight(ctx context.Context, client *http.Client, url string) (int, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return 0, err
	}
	// A service that is not ready (or stopping) still runs calls: the count
	// comes with every answer but the stopping one, which runs none new.
	var r struct {
		InFlight *int `json:"in_flight"`
		Error    *struct{ Code string }
	}
	if json.Unmarshal(body, &r) != nil {
		return 0, fmt.Errorf("%s answered %s: %.200s", url, resp.Status, body)
	}
	if r.InFlight == nil {
		if r.Error != nil && r.Error.Code == "shutting_down" {
			return 0, errors.New("the service is shutting down and cancels its calls")
		}
		return 0, fmt.Errorf("%s answered %s without in_flight: %.200s", url, resp.Status, body)
	}
	return *r.InFlight, nil
}

func isRefused(err error) bool {
	return strings.Contains(err.Error(), "connection refused")
}

// sleep waits d, or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
