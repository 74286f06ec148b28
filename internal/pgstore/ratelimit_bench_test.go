package pgstore_test

import (
	"context"
	"fmt"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/pgstore/pgtest"
	"github.com/countbot/toolsvc/internal/policy"
)

// BenchmarkTake is a key's take of a token: on this replica only (the
// enforcer's own bucket), from the shared bucket in PostgreSQL (one
// statement, one round trip), the whole admission through the shared
// enforcer, the same with 8 callers at once on one key (they queue on the
// row's lock) and on 8 keys, and the take with the table LOGGED, which
// makes each take wait for a WAL sync: what UNLOGGED saves.
//
//	go test -run '^$' -bench Take -benchmem ./internal/pgstore/
func BenchmarkTake(b *testing.B) {
	names := policy.Names{Keys: []string{"carol"}, Tools: []string{"read_file"}}
	p, err := policy.Parse([]byte(`keys: {carol: {rate: {per_minute: 600000000, burst: 1000000}}}`), names)
	if err != nil {
		b.Fatal(err)
	}
	const perSecond, burst = 1e7, 1e6 // never empty: every take takes
	b.Run("local", func(b *testing.B) {
		e := policy.NewEnforcer(names.Keys, nil)
		e.Set(p)
		b.ReportAllocs()
		for b.Loop() {
			if _, reason := e.Admit("carol"); reason != "" {
				b.Fatal(reason)
			}
			e.Release("carol")
		}
	})
	url := pgtest.NewDatabase(b)
	rb := rateBuckets(b, open(b, url, "a"))
	take := func(b *testing.B, key string) {
		if w, err := rb.Take(context.Background(), key, perSecond, burst, time.Time{}); err != nil || w != 0 {
			b.Fatal(w, err)
		}
	}
	b.Run("postgres", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			take(b, "carol")
		}
	})
	b.Run("postgres enforcer", func(b *testing.B) {
		e := policy.NewSharedEnforcer(names.Keys, nil, policy.Shared{Bucket: rb, Replicas: rb.Replicas, Log: zerolog.Nop()})
		e.Set(p)
		b.ReportAllocs()
		for b.Loop() {
			if _, reason := e.Admit("carol"); reason != "" {
				b.Fatal(reason)
			}
			e.Release("carol")
		}
		if e.SharedFallbacks() != 0 {
			b.Fatalf("%d takes fell back", e.SharedFallbacks())
		}
	})
	for _, keys := range []int{1, 8} {
		b.Run(fmt.Sprintf("postgres 8 at once, %d keys", keys), func(b *testing.B) {
			names := make([]string, keys)
			for i := range names {
				names[i] = fmt.Sprint("key", i)
			}
			// RunParallel runs parallelism x GOMAXPROCS callers: 8 of
			// them, sharing the buckets' pool of 4 connections.
			b.SetParallelism((8 + runtime.GOMAXPROCS(0) - 1) / runtime.GOMAXPROCS(0))
			var next atomic.Int64
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				key := names[int(next.Add(1))%keys]
				for pb.Next() {
					take(b, key)
				}
			})
		})
	}
	b.Run("postgres logged", func(b *testing.B) {
		conn, err := pgx.Connect(context.Background(), url)
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close(context.Background())
		if _, err := conn.Exec(context.Background(), "ALTER TABLE rate_buckets SET LOGGED"); err != nil {
			b.Fatal(err)
		}
		b.ReportAllocs()
		for b.Loop() {
			take(b, "carol")
		}
	})
}
