package policy

import "testing"

// BenchmarkAdmit is the enforcer's admission of one call on this replica
// (no shared bucket): a key without a rate, and a key whose bucket always
// has a token. Both must stay around a hundred nanoseconds and allocate
// nothing; the shared bucket's cost is measured beside the database, by
// BenchmarkTake in internal/pgstore.
//
//	go test -run '^$' -bench Admit -benchmem ./internal/policy/
func BenchmarkAdmit(b *testing.B) {
	p, err := Parse([]byte(`keys: {bob: {rate: {per_minute: 600000000, burst: 1000000}, max_concurrent: 64}}`), testNames())
	if err != nil {
		b.Fatal(err)
	}
	e := NewEnforcer(testNames().Keys, nil)
	e.Set(p)
	for _, key := range []string{"alice", "bob"} {
		name := "no rate"
		if key == "bob" {
			name = "rate"
		}
		b.Run(name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, reason := e.Admit(key); reason != "" {
					b.Fatal(reason)
				}
				e.Release(key)
			}
		})
	}
}
