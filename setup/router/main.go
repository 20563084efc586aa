// The router on the client node: Caddy v2 with only what the router's config uses (the HTTP
// app, reverse_proxy with its health checks and selection policies, static responses, headers,
// file storage, the metrics handler that serves GET /metrics). Built off the node by
// components/router/artifact.ts; pinned in go.mod/go.sum.
package main

import (
	caddycmd "github.com/caddyserver/caddy/v2/cmd"

	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
	_ "github.com/caddyserver/caddy/v2/modules/metrics"
)

func main() { caddycmd.Main() }
