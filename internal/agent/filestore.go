package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"github.com/rs/zerolog"
)

// FileTaskStore keeps each task in DIR/<id>.json, written atomically; its
// events are not kept (they are followed live only). It serves one
// process, which answers for every task from memory.
type FileTaskStore struct {
	dir string
	log zerolog.Logger
	now func() time.Time
	mu  sync.Mutex // orders writes
}

// NewFileTaskStore keeps tasks in dir, created if missing. now is the
// clock of the interrupted marks Load makes (nil: time.Now).
func NewFileTaskStore(dir string, log zerolog.Logger, now func() time.Time) (*FileTaskStore, error) {
	if now == nil {
		now = time.Now
	}
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return nil, fmt.Errorf("agents folder: %w", err)
	}
	return &FileTaskStore{dir: dir, log: log, now: now}, nil
}

// Load reads the task files, newest first, removing those beyond
// maxKeptTasks. A task still marked running was cut short by a stop or a
// crash: it is marked interrupted, and its file rewritten.
func (s *FileTaskStore) Load(ctx context.Context) ([]Task, error) {
	files, err := filepath.Glob(filepath.Join(s.dir, "sa-*.json"))
	if err != nil {
		return nil, err
	}
	var all []Task
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, fmt.Errorf("agents folder: %w", err)
		}
		var t Task
		if err := json.Unmarshal(data, &t); err != nil || !idPattern().MatchString(t.ID) || filepath.Base(f) != t.ID+".json" {
			s.log.Warn().Str("file", f).Msg("agents: skipping a task file that cannot be read")
			continue
		}
		all = append(all, t)
	}
	sort.Slice(all, func(i, j int) bool { return all[i].CreatedAt.After(all[j].CreatedAt) })
	if len(all) > maxKeptTasks {
		for _, t := range all[maxKeptTasks:] {
			_ = os.Remove(filepath.Join(s.dir, t.ID+".json"))
		}
		all = all[:maxKeptTasks]
	}
	for i := range all {
		if Active(all[i].Status) {
			markInterrupted(&all[i], s.now().UTC(), "the service stopped while the task was running; its work so far is in the tool calls. Next: spawn it again if it is still needed.")
			if err := s.Save(ctx, all[i], nil); err != nil {
				return nil, err
			}
		}
	}
	return all, nil
}

// markInterrupted ends t as interrupted at now.
func markInterrupted(t *Task, now time.Time, why string) {
	t.Status, t.FinishedAt, t.UpdatedAt = StatusInterrupted, &now, now
	t.Approval = nil
	t.Error = &Failure{Code: FailInterrupted, Message: why}
}

// Save writes the task's file atomically: a temporary file in the same
// folder, synced, then renamed over the old one. Events are not kept:
// they are followed live on one machine, and the file has the state they
// lead to.
func (s *FileTaskStore) Save(_ context.Context, t Task, _ []NumberedEvent) error {
	data, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return writeAtomic(s.dir, t.ID+".json", data)
}

var _ TaskStore = (*FileTaskStore)(nil)
