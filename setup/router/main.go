// The router on the client node: Caddy v2 with only what the router's config uses (the HTTP
// app, reverse_proxy with its health checks and selection policies, static responses, headers,
// file storage, the metrics handler that serves GET /metrics), and one selection policy of its
// own, sparkform_drain (below). Built off the node by components/router/artifact.ts; pinned in
// go.mod/go.sum.
package main

import (
	"net/http"
	"os"
	"strings"
	"sync"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp"
	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
	_ "github.com/caddyserver/caddy/v2/modules/metrics"
)

func init() { caddy.RegisterModule(new(DrainSelection)) }

// DrainSelection is least_conn over the upstreams that a drain file does not name. A replica
// about to restart is taken out of rotation by writing its dial (host:port, one per line) into
// the file (native/router/roll.py, temp name then rename) and put back by removing the line.
// Why not the admin API: every change through it reloads the whole config, and a reload gives
// the streams in flight only the grace period before it cuts them; a file read at selection
// touches nothing in flight, and a router that restarts (a boot) reads the same file.
// When every available upstream is drained, the drained ones still serve: a drain never turns
// an answer the router could give into a 503.
type DrainSelection struct {
	// The drain file; relative paths are from the working directory (the node user's home).
	// Empty or missing: nothing is drained.
	File string `json:"file,omitempty"`

	mu      sync.Mutex
	seen    os.FileInfo
	drained map[string]bool
}

// CaddyModule returns the Caddy module information.
func (*DrainSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.sparkform_drain",
		New: func() caddy.Module { return new(DrainSelection) },
	}
}

// current is the set the file names now; the file is read again only when it changed (a new
// file by rename, or a new size or time), so a request costs one stat.
func (d *DrainSelection) current() map[string]bool {
	if d.File == "" {
		return nil
	}
	info, err := os.Stat(d.File)
	d.mu.Lock()
	defer d.mu.Unlock()
	if err != nil {
		d.seen, d.drained = nil, nil
		return nil
	}
	if d.seen != nil && os.SameFile(d.seen, info) && d.seen.ModTime().Equal(info.ModTime()) && d.seen.Size() == info.Size() {
		return d.drained
	}
	text, err := os.ReadFile(d.File)
	if err != nil {
		return d.drained
	}
	set := map[string]bool{}
	for _, line := range strings.Split(string(text), "\n") {
		if dial := strings.TrimSpace(line); dial != "" {
			set[dial] = true
		}
	}
	d.seen, d.drained = info, set
	return set
}

// Select picks by least_conn among the available upstreams the file does not name, else among
// all of them.
func (d *DrainSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	drained := d.current()
	if len(drained) > 0 {
		kept := make(reverseproxy.UpstreamPool, 0, len(pool))
		for _, u := range pool {
			if !drained[u.Dial] && u.Available() {
				kept = append(kept, u)
			}
		}
		if len(kept) > 0 {
			pool = kept
		}
	}
	return reverseproxy.LeastConnSelection{}.Select(pool, r, w)
}

var _ reverseproxy.Selector = (*DrainSelection)(nil)

func main() { caddycmd.Main() }
