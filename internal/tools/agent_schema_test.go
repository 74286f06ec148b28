package tools

import (
	"encoding/json"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/registry"
)

// TestAgentToolSchemasMatchArgs holds the model's tools (spawn,
// workflow_run, send_message), which registeredTools leaves out for want
// of a model, to the same rule as the others: schema and Go struct agree,
// the required properties are those the tool cannot do without, and a
// misspelt property is reported.
func TestAgentToolSchemasMatchArgs(t *testing.T) {
	reg := registry.New(registry.Options{})
	m, err := agent.NewManager(agent.ManagerOptions{Dir: t.TempDir(), Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	conv, err := agent.NewConversations(agent.ConversationOptions{Dir: t.TempDir(), Tools: reg})
	if err != nil {
		t.Fatal(err)
	}
	rows := []struct {
		tool     registry.Tool
		args     any
		required []string
	}{
		{NewSpawn(m, time.Minute, 1), spawnArgs{}, []string{"task"}},
		{NewWorkflowRun(m, time.Minute), agent.Workflow{}, []string{"agents", "goal"}},
		{NewSendMessage(conv, 1), sendMessageArgs{}, []string{"text"}},
	}
	for _, row := range rows {
		t.Run(row.tool.Name(), func(t *testing.T) {
			if err := reg.Register(row.tool); err != nil {
				t.Fatalf("the schema does not compile: %v", err)
			}
			var schema map[string]any
			if err := json.Unmarshal(row.tool.Parameters(), &schema); err != nil {
				t.Fatal(err)
			}
			for _, p := range compareSchema("", schema, reflect.TypeOf(row.args)) {
				t.Error(p)
			}
			if got, want := requiredOf(schema), sorted(row.required); !slices.Equal(got, want) {
				t.Errorf("schema requires %q; the tool treats %q as required", got, want)
			}
			if ap, ok := schema["additionalProperties"].(bool); !ok || ap {
				t.Errorf("additionalProperties is %v; want false", schema["additionalProperties"])
			}
		})
	}
}
