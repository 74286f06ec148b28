package egress

// Env returns the variables that send a program's connections to the
// proxy at proxyURL (http://host:port): the usual ones in both cases
// (curl reads only the lower-case http_proxy), npm's own, pip's, and
// Node's switch that makes its built-in fetch honour them. NO_PROXY is
// empty, so that nothing is sent around the proxy. npm's check for a
// newer npm is off: it asks the registry at every run, a request an
// allowlist would only refuse or a mirror answer with a 404. npm's
// sockets per host are asked to be 16, which npm 10 keeps; npm 9's proxy
// agent ignores it and opens a tunnel per request, all at once (86 at
// once measured for one server's install), which the proxy's connection
// bound (DefaultMaxConns) must leave room for.
func Env(proxyURL string) []string {
	return []string{
		"HTTP_PROXY=" + proxyURL, "HTTPS_PROXY=" + proxyURL, "ALL_PROXY=" + proxyURL,
		"http_proxy=" + proxyURL, "https_proxy=" + proxyURL, "all_proxy=" + proxyURL,
		"NO_PROXY=", "no_proxy=",
		"npm_config_proxy=" + proxyURL, "npm_config_https_proxy=" + proxyURL,
		"npm_config_update_notifier=false", "npm_config_maxsockets=16",
		"PIP_PROXY=" + proxyURL, "NODE_USE_ENV_PROXY=1",
	}
}
