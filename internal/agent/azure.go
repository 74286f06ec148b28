package agent

import (
	"net/url"
	"strings"
)

// azureAPIVersion is the api-version of Azure OpenAI's classic route
// when the base URL names none: the latest generally available version
// of the data-plane inference API
// (https://learn.microsoft.com/azure/ai-foundry/openai/reference).
const azureAPIVersion = "2024-10-21"

// endpointFor returns the chat-completions URL of a base URL, and
// whether it is Azure OpenAI's classic route, which takes the key in an
// api-key header instead of as a bearer token.
//
// A base URL whose path names a deployment (/openai/deployments/{d}, as
// https://{resource}.openai.azure.com/openai/deployments/gpt-4o) is the
// classic route, told by its path rather than by its host so that
// proxies and private endpoints in front of Azure work too:
// /chat/completions goes after the deployment, and api-version is the
// one in the URL's query or else azureAPIVersion. Any other base URL
// (Azure's v1 API at /openai/v1 included) gets /chat/completions
// appended, its query kept.
func endpointFor(base string) (string, bool) {
	u, err := url.Parse(strings.TrimSpace(base))
	if err != nil {
		return strings.TrimRight(base, "/") + "/chat/completions", false
	}
	u.Path = strings.TrimRight(u.Path, "/") + "/chat/completions"
	u.RawPath = ""
	azure := strings.Contains(u.Path, "/openai/deployments/")
	if azure {
		q := u.Query()
		if q.Get("api-version") == "" {
			q.Set("api-version", azureAPIVersion)
			u.RawQuery = q.Encode()
		}
	}
	return u.String(), azure
}
