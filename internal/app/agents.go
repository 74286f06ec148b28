package app

import (
	"context"
	"path/filepath"
	"time"

	"github.com/rs/zerolog"

	"github.com/countbot/toolsvc/internal/agent"
	"github.com/countbot/toolsvc/internal/approval"
	"github.com/countbot/toolsvc/internal/config"
	"github.com/countbot/toolsvc/internal/registry"
	"github.com/countbot/toolsvc/internal/tracing"
)

// newAgents builds the sub-agent manager when a model endpoint is
// configured (TOOLSVC_LLM_BASE_URL and TOOLSVC_LLM_MODEL), and nil
// otherwise. Its tasks are kept in DATA_DIR/agents/. Running sub-agents
// stop when stopping is done; wait waits for them to record it, at most
// shutdownTimeout.
// moreAllowed names the tools from the file sub-agents may use;
// keyLimits, when set, gives each key's own bounds (the policy's);
// approvals, when set, is where a task whose call is held for a person
// waits for the decision; tracer, when set, traces the model calls.
func newAgents(stopping context.Context, cfg config.Agents, st stores, shutdownTimeout time.Duration, reg *registry.Registry, dataDir string, log zerolog.Logger, redact func(string) string, moreAllowed func() []string, keyLimits func(string) (int, int), approvals *approval.Service, tracer *tracing.Tracer) (m *agent.Manager, wait func(), err error) {
	if !cfg.AgentsEnabled() {
		return nil, func() {}, nil
	}
	client := agent.NewClient(agent.ClientOptions{
		BaseURL:    cfg.LLMBaseURL,
		APIKey:     string(cfg.LLMAPIKey),
		Model:      cfg.LLMModel,
		Timeout:    cfg.LLMTimeout,
		Tracer:     tracer,
		Stream:     cfg.LLMStream,
		EchoFields: cfg.LLMEchoFields,
	})
	var waiter agent.ApprovalWaiter
	if approvals != nil { // a nil *Service in the interface would not be nil
		waiter = approvals
	}
	m, err = agent.NewManager(agent.ManagerOptions{
		Base:          stopping,
		Store:         st.tasks,
		Replica:       st.replica,
		Lease:         st.lease,
		Dir:           filepath.Join(dataDir, "agents"),
		Model:         client,
		ModelName:     cfg.LLMModel,
		Tools:         reg,
		MaxTurns:      cfg.AgentMaxTurns,
		Timeout:       cfg.AgentTimeout,
		MaxConcurrent: cfg.AgentMaxConcurrent,
		Log:           log.With().Str("component", "agents").Logger(),
		Redact:        redact,
		Allowed:       SubagentTools(),
		MoreAllowed:   moreAllowed,
		KeyLimits:     keyLimits,
		Approvals:     waiter,
	})
	if err != nil {
		return nil, nil, err
	}
	// The endpoint is logged without the key, which never leaves the client.
	log.Info().Str("llm_base_url", cfg.LLMBaseURL).Str("llm_model", cfg.LLMModel).
		Bool("llm_key", cfg.LLMAPIKey != "").Int("max_concurrent", cfg.AgentMaxConcurrent).Msg("sub-agents: on")
	return m, func() {
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		m.Close(ctx)
	}, nil
}

// newConversations builds send_message's conversations when the
// voice-device conversation mode is on (TOOLSVC_XIAOZHI_CONVERSATION, which
// needs a model), and nil otherwise. Histories are kept in
// DATA_DIR/conversations/.
func newConversations(cfg config.Agents, st stores, m *agent.Manager, reg *registry.Registry, dataDir string, log zerolog.Logger, redact func(string) string) (*agent.Conversations, error) {
	if !cfg.XiaozhiConversation || m == nil {
		return nil, nil
	}
	return agent.NewConversations(agent.ConversationOptions{
		Store:         st.conversations,
		Dir:           filepath.Join(dataDir, "conversations"),
		Model:         m.Model(),
		Tools:         reg,
		Allowed:       ConversationTools(),
		MaxTurns:      cfg.AgentMaxTurns,
		MaxConcurrent: cfg.AgentMaxConcurrent,
		Redact:        redact,
		Log:           log.With().Str("component", "conversations").Logger(),
	})
}
