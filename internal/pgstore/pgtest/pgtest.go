// Package pgtest gives each test a PostgreSQL database of its own, on the
// server TOOLSVC_TEST_DATABASE_URL names (default: the local one,
// postgres@127.0.0.1:5432 with trust authentication, as scripts/test.sh
// sets it up), dropped when the test ends.
package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"net/url"
	"os"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// Server is the URL of the maintenance database tests create theirs from.
func Server() string {
	if u := os.Getenv("TOOLSVC_TEST_DATABASE_URL"); u != "" {
		return u
	}
	return "postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable"
}

// NewDatabase creates an empty database and returns its URL; it is
// dropped (with any connection left to it) when t ends.
func NewDatabase(t testing.TB) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, Server())
	if err != nil {
		t.Fatalf("PostgreSQL for tests (scripts/test.sh starts it; TOOLSVC_TEST_DATABASE_URL names another): %v", err)
	}
	defer conn.Close(ctx)
	var b [6]byte
	_, _ = rand.Read(b[:])
	name := "toolsvc_test_" + hex.EncodeToString(b[:])
	if _, err := conn.Exec(ctx, "CREATE DATABASE "+name); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := pgx.Connect(ctx, Server())
		if err != nil {
			t.Errorf("dropping %s: %v", name, err)
			return
		}
		defer c.Close(ctx)
		if _, err := c.Exec(ctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)"); err != nil {
			t.Errorf("dropping %s: %v", name, err)
		}
	})
	u, err := url.Parse(Server())
	if err != nil {
		t.Fatal(err)
	}
	u.Path = "/" + name
	return u.String()
}
