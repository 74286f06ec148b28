package http

import "context"

type requestIDKey struct{}

func contextWithRequestID(ctx context.Context, id string) context.Context {
	return context.WithValue(ctx, requestIDKey{}, id)
}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey{}).(string)
	return id
}

// requestNotes is what handlers deeper in the chain learn about a request
// for its access log line, which is written outside them: the name of the
// key the gate authenticated.
type requestNotes struct {
	key string
}

type notesKey struct{}

// noteKey records the request's key name for its access log line.
func noteKey(ctx context.Context, name string) {
	if n, ok := ctx.Value(notesKey{}).(*requestNotes); ok {
		n.key = name
	}
}
