package config

import "net/url"

// Traces is where the service sends its OpenTelemetry traces: a span for
// each request at a door, each call, and the work the call does (commands,
// fetched pages, screenshots, mounted MCP servers, sub-agents' model
// calls). internal/tracing builds the exporter from it; the OTEL_*
// variables of the OpenTelemetry SDK refine it (docs/traces.md).
type Traces struct {
	OTelEndpoint       string `env:"OTEL_ENDPOINT" desc:"OTLP over HTTP endpoint that receives traces, such as http://localhost:4318 (/v1/traces is added to a URL without a path; a URL with a path is used as it is). Empty: no traces, at no cost per call. The SDK's standard variables apply: OTEL_EXPORTER_OTLP_HEADERS (authentication), OTEL_SERVICE_NAME (default toolsvc), OTEL_RESOURCE_ATTRIBUTES, OTEL_TRACES_SAMPLER and OTEL_TRACES_SAMPLER_ARG (default parentbased_always_on), OTEL_EXPORTER_OTLP_TIMEOUT, OTEL_BSP_*; OTEL_SDK_DISABLED=true turns traces off"`
	OTelCaptureContent bool   `env:"OTEL_CAPTURE_CONTENT" default:"false" desc:"put each call's arguments and result on its spans (gen_ai.tool.call.arguments and gen_ai.tool.call.result, also on the calls to mounted MCP servers), redacted as the audit record is and cut to 8192 bytes each; off: spans say which tool ran and how it ended, not with what"`
}

func (s Traces) validate(bad report) {
	if s.OTelEndpoint == "" {
		return
	}
	u, err := url.Parse(s.OTelEndpoint)
	switch {
	case err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "":
		bad("OTEL_ENDPOINT", "%q is not an http:// or https:// URL such as http://localhost:4318", s.OTelEndpoint)
	case u.User != nil:
		bad("OTEL_ENDPOINT", "must not hold a user name or password; send credentials with OTEL_EXPORTER_OTLP_HEADERS")
	}
}
