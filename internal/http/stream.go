package http

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/countbot/toolsvc/internal/jsonx"
)

// streamQueue is how many events may wait for a slow client. A tool never
// waits for the client: when the queue is full, events are dropped and
// counted, and the client is told how many it missed. The result event
// still carries the whole (bounded) result.
const streamQueue = 64

// eventStream writes a call's server-sent events from one goroutine, each
// write under its own deadline. A client that stops reading makes a write
// fail at that deadline; the call is then canceled, so it ends, is audited
// and frees its slot, instead of waiting on a full socket for ever.
type eventStream struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	stall   time.Duration
	cancel  func()
	queue   chan []byte
	mu      sync.Mutex // guards sending on queue against its closing
	closed  bool
	dropped atomic.Int64
	done    chan struct{}
	failed  atomic.Bool
}

func newEventStream(w http.ResponseWriter, rc *http.ResponseController, stall time.Duration, cancel func()) *eventStream {
	es := &eventStream{w: w, rc: rc, stall: stall, cancel: cancel,
		queue: make(chan []byte, streamQueue), done: make(chan struct{})}
	go es.loop()
	return es
}

// progress queues one event without blocking the tool.
func (es *eventStream) progress(event, text string) {
	if es.failed.Load() {
		return
	}
	es.queueFrame(eventFrame(event, textData(text)))
}

// event queues one event whose data is JSON already (one line), without
// blocking.
func (es *eventStream) event(event string, data []byte) { es.queueFrame(eventFrame(event, data)) }

// comment queues a comment line, which clients ignore: a sign of life
// while nothing else is sent.
func (es *eventStream) comment(text string) {
	es.queueFrame([]byte(": " + strings.NewReplacer("\r", " ", "\n", " ").Replace(text) + "\n\n"))
}

func (es *eventStream) queueFrame(frame []byte) {
	if es.failed.Load() {
		return
	}
	es.mu.Lock()
	defer es.mu.Unlock()
	if es.closed {
		return
	}
	select {
	case es.queue <- frame:
	default:
		es.dropped.Add(1)
	}
}

// finish queues the last event, waits until everything queued is written
// or the stream has failed, and returns whether the client got it all.
func (es *eventStream) finish(event string, data []byte) bool {
	es.mu.Lock()
	es.closed = true
	es.mu.Unlock()
	es.queue <- eventFrame(event, data)
	close(es.queue)
	<-es.done
	return !es.failed.Load()
}

func (es *eventStream) loop() {
	defer close(es.done)
	for frame := range es.queue {
		if es.failed.Load() {
			continue // keep draining so that finish never blocks
		}
		if n := es.dropped.Swap(0); n > 0 {
			note := fmt.Sprintf("\n[... %d output events not streamed because the client read too slowly; the result has the output ...]\n", n)
			if !es.write(eventFrame("output", textData(note))) {
				continue
			}
		}
		es.write(frame)
	}
}

func (es *eventStream) write(frame []byte) bool {
	_ = es.rc.SetWriteDeadline(time.Now().Add(es.stall))
	_, err := es.w.Write(frame)
	if err == nil {
		err = es.rc.Flush()
	}
	if err != nil {
		es.failed.Store(true)
		es.cancel()
		return false
	}
	return true
}

// textData is the data of a progress event: a JSON object {"text": ...}.
// JSON escapes carriage returns, newlines and the Unicode line separators,
// so nothing a command prints can end the data line, start an event of its
// own or pass for the result.
func textData(text string) []byte {
	data, err := jsonx.Marshal(struct {
		Text string `json:"text"`
	}{text})
	if err != nil {
		return []byte(`{"text":""}`)
	}
	return data
}

// eventFrame builds one event. data must be a single line (marshal's JSON
// is); the event name is reduced to letters, digits, '_' and '-'.
func eventFrame(event string, data []byte) []byte {
	event = strings.Map(func(c rune) rune {
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			return c
		}
		return -1
	}, event)
	if event == "" {
		event = "progress"
	}
	b := make([]byte, 0, len(event)+len(data)+16)
	b = append(b, "event: "...)
	b = append(b, event...)
	b = append(b, "\ndata: "...)
	b = append(b, data...)
	b = append(b, "\n\n"...)
	return b
}
