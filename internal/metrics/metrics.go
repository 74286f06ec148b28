// Package metrics keeps the service's Prometheus metrics: tool calls by
// outcome, errors by code, call durations per tool, calls in flight, audit
// log faults, calls the key policy refused and the exec sandbox's mode, beside the Go runtime's and the
// process's own. It is the registry's Observer, so the registry needs no
// Prometheus import, and it uses a registry of its own, not the global one.
package metrics

import (
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metrics is safe for concurrent use.
type Metrics struct {
	reg      *prometheus.Registry
	calls    *prometheus.CounterVec
	errors   *prometheus.CounterVec
	duration *prometheus.HistogramVec
	inFlight prometheus.Gauge
	audit    *prometheus.CounterVec
	refused  *prometheus.CounterVec
	sandbox  *prometheus.GaugeVec
	// tools holds each tool's series of a successful call (*toolSeries),
	// looked up once: finding a series by its labels hashes them, a good
	// part of what recording a call cost. Tool names are bounded (the
	// registry reports any other name as one label).
	tools sync.Map
}

// toolSeries are the series a successful call of one tool adds to.
type toolSeries struct {
	success  prometheus.Counter
	duration prometheus.Observer
}

// New returns the metrics, registered with a fresh Prometheus registry.
func New() *Metrics {
	m := &Metrics{
		reg: prometheus.NewRegistry(),
		calls: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolsvc_tool_calls_total",
			Help: "Tool calls that ended, by tool and status (success or error). Names that are no tool count as tool=\"_unknown\".",
		}, []string{"tool", "status"}),
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolsvc_tool_errors_total",
			Help: "Tool calls that ended in an error, by tool and error code (invalid_arguments, timeout, path_denied...).",
		}, []string{"tool", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "toolsvc_tool_call_duration_seconds",
			Help: "Duration of tool calls, audit included, by tool.",
			// From a cached file read to a long command or sub-agent.
			Buckets: []float64{.001, .005, .01, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600},
		}, []string{"tool"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "toolsvc_tool_calls_in_flight",
			Help: "Tool calls running now, over every door (REST, MCP, sub-agents).",
		}),
		audit: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolsvc_audit_failures_total",
			Help: "Audit log faults: stage=\"start\" (the call's start could not be recorded) or \"finish\" (its final record could not be written).",
		}, []string{"stage"}),
		refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "toolsvc_calls_refused_total",
			Help: "Calls the key policy (TOOLSVC_POLICY_FILE) refused before they ran, by key name and reason: denied (a tool the key may not call), rate (over its rate) or concurrency (over its calls at once).",
		}, []string{"key", "reason"}),
		sandbox: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "toolsvc_exec_sandbox_mode",
			Help: "1 for the exec sandbox's mode in force (bwrap, landlock, none), or mode=\"off\" when exec is not offered.",
		}, []string{"mode"}),
	}
	// Both stages are present from the start, at 0, so an alert on their
	// rate needs no special case for a series that does not exist yet.
	m.audit.WithLabelValues("start")
	m.audit.WithLabelValues("finish")
	m.reg.MustRegister(m.calls, m.errors, m.duration, m.inFlight, m.audit, m.refused, m.sandbox,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return m
}

// CallStarted implements registry.Observer.
func (m *Metrics) CallStarted(string) { m.inFlight.Inc() }

// CallEnded implements registry.Observer.
func (m *Metrics) CallEnded(tool, status, code string, d time.Duration) {
	m.inFlight.Dec()
	if status == "success" && code == "" {
		ts := m.series(tool)
		ts.success.Inc()
		ts.duration.Observe(d.Seconds())
		return
	}
	m.calls.WithLabelValues(tool, status).Inc()
	if code != "" {
		m.errors.WithLabelValues(tool, code).Inc()
	}
	m.duration.WithLabelValues(tool).Observe(d.Seconds())
}

func (m *Metrics) series(tool string) *toolSeries {
	if ts, ok := m.tools.Load(tool); ok {
		return ts.(*toolSeries)
	}
	ts, _ := m.tools.LoadOrStore(tool, &toolSeries{
		success:  m.calls.WithLabelValues(tool, "success"),
		duration: m.duration.WithLabelValues(tool),
	})
	return ts.(*toolSeries)
}

// AuditFailed implements registry.Observer.
func (m *Metrics) AuditFailed(stage string) { m.audit.WithLabelValues(stage).Inc() }

// CallRefused implements registry.Observer. Key names are the operator's
// (a bounded set), never what a caller sent.
func (m *Metrics) CallRefused(key, reason string) { m.refused.WithLabelValues(key, reason).Inc() }

// SetSandboxMode records the exec sandbox's mode; "off" when exec is not
// offered.
func (m *Metrics) SetSandboxMode(mode string) {
	m.sandbox.Reset()
	m.sandbox.WithLabelValues(mode).Set(1)
}

// Handler serves the metrics in Prometheus's text format.
func (m *Metrics) Handler() http.Handler {
	return promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{})
}
