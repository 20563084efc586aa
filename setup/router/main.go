// The router on the client node: Caddy v2 with only what the router's config uses (the HTTP
// app, reverse_proxy with its health checks and selection policies, static responses, headers,
// file storage, the metrics handler that serves GET /metrics), and one selection policy of its
// own, sparkform_drain (below). Built off the node by components/router/artifact.ts; pinned in
// go.mod/go.sum.
package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/caddyserver/caddy/v2"
	caddycmd "github.com/caddyserver/caddy/v2/cmd"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp"
	"github.com/caddyserver/caddy/v2/modules/caddyhttp/reverseproxy"

	_ "github.com/caddyserver/caddy/v2/modules/caddyhttp/headers"
	_ "github.com/caddyserver/caddy/v2/modules/filestorage"
	_ "github.com/caddyserver/caddy/v2/modules/metrics"
)

func init() { caddy.RegisterModule(new(DrainSelection)) }

// ConversationHeader names the conversation a request belongs to; the client sets it (any
// text: a chat's id). Requests that carry the same value go to the same llama-server while it
// is healthy, undrained and has a free slot, so the prompt it already holds in its KV cache is
// reused instead of computed again.
const ConversationHeader = "X-Conversation-Id"

// Without that header a POST's conversation is its prompt's beginning: a chat's messages up to
// and including the first user message, or a completion prompt's first promptBytes, hashed.
// The body is read for it up to prefixLimit bytes, or whatever arrived within prefixWait (a
// client that uploads slowly is held back no longer), and passed on whole and unchanged. The
// wait is long for a body sent with its headers, as clients send it: on a busy node (2 cores,
// tests running) 20 ms passed before the first bytes were read, and the turn lost its server.
const (
	prefixLimit = 64 << 10
	prefixWait  = 250 * time.Millisecond
	promptBytes = 1024
)

// A conversation known only by its prompt goes to its own upstream while that one has no more
// than boundedLoad times its share of the POSTs in flight (consistent hashing with bounded
// loads): many requests that begin alike (a benchmark, one question asked by many) still spread.
// The bound is never under boundedMin: at low load it would be one request, and a turn sent the
// instant the last one ended (whose slot is given back just after the client has its answer)
// would move.
const (
	boundedLoad = 1.25
	boundedMin  = 2
)

// FullRetryAfter is the Retry-After (seconds) of the 503 a request gets when every server is
// busy with as many requests as it has slots and the queue in front of them is full (or the
// request waited its bound there): about one short answer's time. The OpenAI SDKs retry a 503
// after it (twice by default).
const FullRetryAfter = "1"

// fullBody is that 503's body, shaped as the OpenAI API's errors (the SDKs read error.message).
const fullBody = `{"error":{"message":"every llama-server behind this router is busy with as many ` +
	`requests as it has slots (sparkform:server.parallel) and the router's queue is full, or this ` +
	`request waited there as long as it may: the router answers instead of queueing without bound; ` +
	`retry after Retry-After seconds (the OpenAI SDKs do), or give the servers more slots or ` +
	`replicas","type":"server_busy","code":503}}` + "\n"

// A POST that finds every server full waits for a slot, a bounded while: at most QueueDepth such
// POSTs wait at once (default: queueSlotsFactor times the healthy servers' slots), each at most
// QueueWait (default queueWaitDefault).
// Past either bound it gets the 503 at once. Why wait at all: a slot is usually free again within
// one short answer, and a client without retries (curl, a script) would otherwise fail where a
// second later it would have been served; why bounded: a queue without bound hides an overloaded
// cluster behind ever longer answers, and the SDKs' retry after Retry-After does the rest.
const queueWaitDefault = 10 * time.Second

// queueSlotsFactor: the default queue holds twice the slots, not once. A slot is given back when
// its request's context ends, a moment after the client has its answer; a client that sends its
// next request at once (the node-loss e2e's two clients on one slot) can arrive before that, find
// the other client waiting, and with a queue of one slot be refused although a slot was freeing.
const queueSlotsFactor = 2

// queuePoll is how often a waiting POST looks again without being woken (an upstream that came
// back healthy, or a drain lifted, frees no slot and wakes nobody).
const queuePoll = 250 * time.Millisecond

// DrainSelection picks the llama-server for a request (issues 33 and 37):
//
//   - with several models served side by side (sparkform:server.models: one llama-server per
//     model, `models` maps each upstream's dial to its model), only the upstreams of the model a
//     POST's JSON body names (`"model"`, read from the body's beginning as the prompt is) are
//     candidates, and everything below holds among them: their stickiness, their slots, their
//     own bounded queue. A POST that names no model goes to default_model's (the first served);
//     one that names a model not served is answered 404 by the policy's second loopback
//     listener (notFoundBody), as the OpenAI API answers it. A GET with `?model=` goes to that
//     model's upstreams. With one model (no `models`), a request's model field is not read:
//     clients send anything, as they may to one llama-server. Why not llama-server's own router
//     mode (--models-dir/--models-preset, in the pinned build's tools/server/server-models.cpp):
//     it starts and stops its model instances itself (--models-max, autoload), under one unit,
//     one port and one process's fate, where sparkform plans each model's memory, smokes,
//     guards and rolls each server as its own unit;
//   - a drain file names upstreams that get no new request while another healthy one can take
//     it: a replica about to restart is taken out of rotation by writing its dial (host:port,
//     one per line) into the file (native/router/roll.py, temp name then rename) and put back by
//     removing the line. Why not the admin API: every change through it reloads the whole
//     config, and a reload gives the streams in flight only the grace period before it cuts
//     them; a file read at selection touches nothing in flight, and a router that restarts (a
//     boot) reads the same file. When every healthy upstream is drained, the drained ones still
//     serve: a drain never turns an answer into a 503. While an undrained one is healthy but
//     full, a POST waits in the queue for its slot instead (a drained server is about to stop);
//   - a POST carrying ConversationHeader goes to the first upstream with a free slot in that
//     conversation's rendezvous order over the healthy, undrained upstreams (highest
//     hash(key, dial) first): an upstream that leaves the set moves only its own conversations,
//     and they come back when it returns. Without the header, the prompt's beginning is the key
//     (promptKey), with bounded loads (boundedLoad); without either, the least busy upstream;
//   - a POST is admitted only while its upstream has fewer requests in flight than its
//     `max_requests` (llama-server's --parallel slots): when every healthy upstream is full,
//     the request waits for a slot in a bounded queue (QueueDepth, QueueWait) and past those
//     bounds is answered 503 with Retry-After at once instead of queueing without bound. A POST
//     that arrives while others wait queues behind them (it does not take the slot they wait
//     for). Other methods (GET /health, /v1/models, /slots) hold no slot and are never refused.
//
// Why the policy counts the POSTs itself instead of Caddy's Upstream.Full: Caddy's count
// includes every request to that address (the metrics routes' too), it is checked and
// incremented apart (concurrent requests pass the same check), and a full pool is Caddy's "no
// upstreams available", which the handler retries for try_duration before answering, the queue
// this is meant to refuse. So a slot is taken here under a lock, given back when the request's
// handling ends (its context is done), and a full pool selects an upstream of the policy's own:
// a listener on the loopback that answers the 503 (fullBody) at once, passed to the client as any
// upstream's answer, not retried and counted against no server.
type DrainSelection struct {
	// The drain file; relative paths are from the working directory (the node user's home).
	// Empty or missing: nothing is drained.
	File string `json:"file,omitempty"`
	// POSTs that may wait for a slot at once; absent: twice the healthy upstreams' slots.
	// 0: none waits (every POST past the slots gets the 503 at once).
	QueueDepth *int `json:"queue_depth,omitempty"`
	// How long one POST may wait for a slot; absent or 0: queueWaitDefault.
	QueueWait caddy.Duration `json:"queue_wait,omitempty"`
	// The model each upstream serves, by dial, when several are served side by side; empty:
	// one model, and a request's model field is not read.
	Models map[string]string `json:"models,omitempty"`
	// The model of a POST whose body names none (required with Models).
	DefaultModel string `json:"default_model,omitempty"`

	mu      sync.Mutex
	seen    os.FileInfo
	drained map[string]bool

	// POSTs in flight per dial (the slots taken), under slotsMu.
	slotsMu sync.Mutex
	busy    map[string]int
	// POSTs waiting for a slot, first come first served (per model: a waiter takes only a slot
	// of its model's servers): a slot given back goes straight to the first waiter of its model
	// (handed over under slotsMu), so a POST arriving that instant cannot take it and find the
	// queue still counting the waiter it just served.
	queue []*waiter

	full     *reverseproxy.Upstream
	fullStop func() error
	// The upstream that answers a POST naming a model not served (404), with Models only.
	notFound     *reverseproxy.Upstream
	notFoundStop func() error
}

// notFoundBody is the OpenAI API's answer to a model it does not have (the SDKs raise
// NotFoundError), naming the ones served here.
func notFoundBody(model string, served []string) []byte {
	type apiError struct {
		Message string `json:"message"`
		Type    string `json:"type"`
		Param   string `json:"param"`
		Code    string `json:"code"`
	}
	b, _ := json.Marshal(struct {
		Error apiError `json:"error"`
	}{apiError{
		Message: fmt.Sprintf("The model `%s` does not exist or is not served here; served: %s",
			model, strings.Join(served, ", ")),
		Type:  "invalid_request_error",
		Param: "model",
		Code:  "model_not_found",
	}})
	return append(b, '\n')
}

// served is the models served, sorted.
func (d *DrainSelection) served() []string {
	seen := map[string]bool{}
	var out []string
	for _, m := range d.Models {
		if !seen[m] {
			seen[m] = true
			out = append(out, m)
		}
	}
	sort.Strings(out)
	return out
}

// loopback serves h on an ephemeral port of 127.0.0.1: an upstream of the policy's own, whose
// answer Caddy passes to the client as any upstream's (not retried, counted against no server).
func loopback(what string, h http.HandlerFunc) (*reverseproxy.Upstream, func() error, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, nil, fmt.Errorf("sparkform_drain: cannot listen on 127.0.0.1 for %s (%w); "+
			"the router needs the node's IPv4 loopback", what, err)
	}
	srv := &http.Server{Handler: h}
	go func() { _ = srv.Serve(ln) }()
	return &reverseproxy.Upstream{Host: new(reverseproxy.Host), Dial: ln.Addr().String()}, srv.Close, nil
}

// CaddyModule returns the Caddy module information.
func (*DrainSelection) CaddyModule() caddy.ModuleInfo {
	return caddy.ModuleInfo{
		ID:  "http.reverse_proxy.selection_policies.sparkform_drain",
		New: func() caddy.Module { return new(DrainSelection) },
	}
}

// Provision starts the loopback listeners that answer a full pool's 503 and, with several
// models, an unknown model's 404.
func (d *DrainSelection) Provision(caddy.Context) error {
	d.busy = map[string]int{}
	if d.QueueWait <= 0 {
		d.QueueWait = caddy.Duration(queueWaitDefault)
	}
	if d.QueueDepth != nil && *d.QueueDepth < 0 {
		return fmt.Errorf("sparkform_drain: queue_depth %d is negative; use 0 (no queue) or more", *d.QueueDepth)
	}
	if len(d.Models) > 0 && !d.serves(d.DefaultModel) {
		return fmt.Errorf("sparkform_drain: default_model %q is not one of the models served (%s); "+
			"it must name one of them (the router's config is rendered by caddy-config.ts)",
			d.DefaultModel, strings.Join(d.served(), ", "))
	}
	var err error
	d.full, d.fullStop, err = loopback("the 503 it answers when every llama-server is full",
		func(w http.ResponseWriter, r *http.Request) {
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Retry-After", FullRetryAfter)
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusServiceUnavailable)
			_, _ = w.Write([]byte(fullBody))
		})
	if err != nil || len(d.Models) == 0 {
		return err
	}
	served := d.served()
	d.notFound, d.notFoundStop, err = loopback("the 404 it answers for a model not served",
		func(w http.ResponseWriter, r *http.Request) {
			// The body as the client sent it: the policy read its model from the same bytes.
			prefix, _ := io.ReadAll(io.LimitReader(r.Body, prefixLimit))
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Cache-Control", "no-store")
			w.WriteHeader(http.StatusNotFound)
			_, _ = w.Write(notFoundBody(bodyModel(prefix), served))
		})
	return err
}

// Cleanup stops those listeners.
func (d *DrainSelection) Cleanup() error {
	var err error
	for _, stop := range []func() error{d.fullStop, d.notFoundStop} {
		if stop != nil {
			err = errors.Join(err, stop())
		}
	}
	return err
}

// serves is whether some upstream serves model.
func (d *DrainSelection) serves(model string) bool {
	for _, m := range d.Models {
		if m == model {
			return true
		}
	}
	return false
}

// ofModel is the pool's upstreams that serve model.
func (d *DrainSelection) ofModel(pool reverseproxy.UpstreamPool, model string) reverseproxy.UpstreamPool {
	var out reverseproxy.UpstreamPool
	for _, u := range pool {
		if d.Models[u.Dial] == model {
			out = append(out, u)
		}
	}
	return out
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

// ticket is a POST's slot: the dial it holds (moved when a failed dial makes Caddy select again)
// and the dials it failed on.
type ticket struct {
	dial   string
	failed map[string]bool
	// The conversation, and whether the client named it (the header) or its prompt did.
	key    string
	header bool
	// The model it is for ("" with one model served).
	model string
}

const ticketVar = "sparkform_slot"

// Select picks the upstream (see DrainSelection). Caddy calls it again for the same request
// only after the previous pick could not be dialled: that upstream is then tried last.
func (d *DrainSelection) Select(pool reverseproxy.UpstreamPool, r *http.Request, w http.ResponseWriter) *reverseproxy.Upstream {
	if r.Method != http.MethodPost {
		if m := r.URL.Query().Get("model"); m != "" && d.serves(m) {
			pool = d.ofModel(pool, m)
		}
		kept, out := d.tiers(pool)
		if len(kept) == 0 {
			kept = out
		}
		if len(kept) == 0 {
			return nil
		}
		return leastBusy(kept, nil)
	}
	t, _ := caddyhttp.GetVar(r.Context(), ticketVar).(*ticket)
	if t == nil {
		t = &ticket{failed: map[string]bool{}, key: r.Header.Get(ConversationHeader)}
		t.header = t.key != ""
		if !t.header || len(d.Models) > 0 {
			prefix := peekBody(r)
			if !t.header {
				t.key = promptKey(prefix)
			}
			if len(d.Models) > 0 {
				if t.model = bodyModel(prefix); t.model == "" {
					t.model = d.DefaultModel
				}
			}
		}
		caddyhttp.SetVar(r.Context(), ticketVar, t)
		// The slot is given back when the request's handling ends, however it ends.
		context.AfterFunc(r.Context(), func() {
			d.slotsMu.Lock()
			defer d.slotsMu.Unlock()
			if t.dial != "" {
				d.release(t.dial)
				t.dial = ""
			}
		})
	}
	if len(d.Models) > 0 {
		if !d.serves(t.model) {
			return d.notFound
		}
		pool = d.ofModel(pool, t.model)
	}
	kept, out := d.tiers(pool)
	if len(kept)+len(out) == 0 {
		// None healthy: Caddy's "no upstreams available", retried until try_duration, then the
		// error route's 503 with the reason.
		return nil
	}
	d.slotsMu.Lock()
	defer d.slotsMu.Unlock()
	if t.dial != "" {
		// A retry: the last pick could not be dialled. Its slot is given back; it is tried
		// again only when no other upstream can take the request.
		t.failed[t.dial] = true
		d.release(t.dial)
		t.dial = ""
	}
	// A POST that arrives while others wait queues behind them instead of taking the slot they
	// wait for; a retry (t.failed set) has waited its turn already.
	if t.key != "" && len(t.failed) == 0 {
		d.awaitHome(kept, t)
	}
	if d.queued(t.model) == 0 || len(t.failed) > 0 {
		if u := d.pick(kept, out, t); u != nil {
			return u
		}
	}
	if d.queued(t.model) >= d.depth(pool) {
		return d.full
	}
	me := &waiter{t: t, ready: make(chan struct{})}
	d.queue = append(d.queue, me)
	deadline := time.Now().Add(time.Duration(d.QueueWait))
	for {
		d.slotsMu.Unlock()
		timer := time.NewTimer(max(min(queuePoll, time.Until(deadline)), 0))
		select {
		case <-me.ready:
		case <-timer.C:
		case <-r.Context().Done():
		}
		timer.Stop()
		kept, out = d.tiers(pool)
		d.slotsMu.Lock()
		if me.handed != "" {
			// A slot was handed over: this request holds it now.
			t.dial, me.handed = me.handed, ""
			if r.Context().Err() == nil {
				if u := find(kept, out, t.dial); u != nil && !t.failed[t.dial] {
					return u
				}
			}
			// Gone, unhealthy or failed for this request: passed on to the next waiter.
			d.release(t.dial)
			t.dial = ""
			if r.Context().Err() != nil {
				return d.full
			}
			d.queue = append([]*waiter{me}, d.queue...)
			me.ready = make(chan struct{})
			continue
		}
		if r.Context().Err() != nil {
			// The client went away while it waited: nobody reads the answer.
			d.dequeue(me)
			return d.full
		}
		// Nothing handed over: an upstream back in rotation (or a drain lifted) frees no slot and
		// hands none, so a waiter looks for itself now and then.
		if u := d.pick(kept, out, t); u != nil {
			d.dequeue(me)
			return u
		}
		if !time.Now().Before(deadline) {
			d.dequeue(me)
			return d.full
		}
	}
}

// homeGrace is how long a conversation's request waits for its own server's slot before it goes
// to its next choice. A slot is given back when its request's context ends, a moment after the
// client has its answer: a turn sent at once (a chat's next message, an agent's next step) found
// its server still counted full and moved, losing the KV cache it came back for (router-caddy:
// a one-slot server's conversation moved under load). Short, so a server that is really busy
// sheds its conversations' new requests almost at once.
const homeGrace = 100 * time.Millisecond

// awaitHome waits up to homeGrace for a slot on the conversation's first choice among the
// undrained servers when that one is full (slotsMu held; released while it waits).
func (d *DrainSelection) awaitHome(kept []*reverseproxy.Upstream, t *ticket) {
	var home *reverseproxy.Upstream
	for _, u := range kept {
		if home == nil || score(t.key, u.Dial) > score(t.key, home.Dial) {
			home = u
		}
	}
	if home == nil || home.MaxRequests <= 0 {
		return
	}
	for deadline := time.Now().Add(homeGrace); d.busy[home.Dial] >= home.MaxRequests && time.Now().Before(deadline); {
		d.slotsMu.Unlock()
		time.Sleep(5 * time.Millisecond)
		d.slotsMu.Lock()
	}
}

// waiter is a POST in the queue: the dial handed to it, and closed ready when it was.
type waiter struct {
	t      *ticket
	handed string
	ready  chan struct{}
}

// dequeue takes a waiter out of the queue (slotsMu held).
func (d *DrainSelection) dequeue(w *waiter) {
	for i, x := range d.queue {
		if x == w {
			d.queue = append(d.queue[:i:i], d.queue[i+1:]...)
			return
		}
	}
}

// find is the healthy upstream with this dial, undrained or drained.
func find(kept, out []*reverseproxy.Upstream, dial string) *reverseproxy.Upstream {
	for _, tier := range [][]*reverseproxy.Upstream{kept, out} {
		for _, u := range tier {
			if u.Dial == dial {
				return u
			}
		}
	}
	return nil
}

// tiers splits the healthy upstreams into those the drain file does not name (kept) and those
// it does (out).
func (d *DrainSelection) tiers(pool reverseproxy.UpstreamPool) (kept, out []*reverseproxy.Upstream) {
	drained := d.current()
	for _, u := range pool {
		if !u.Healthy() {
			continue
		}
		if drained[u.Dial] {
			out = append(out, u)
		} else {
			kept = append(kept, u)
		}
	}
	return kept, out
}

// pick takes a slot for the request on the conversation's upstream (or the least busy) with one
// free; nil when every one is full (slotsMu held). An upstream
// this request could not dial is picked only when no other is left at all: while the others are
// merely full the request waits for their slots, not for a dead node's dial to fail again.
func (d *DrainSelection) pick(kept, out []*reverseproxy.Upstream, t *ticket) *reverseproxy.Upstream {
	// The drained serve only when no undrained upstream is healthy: while one is merely full,
	// a POST waits for its slot rather than land on a server about to restart (roll.py waits
	// for that server's slots to go idle, and a POST sent to it then would be cut by the stop).
	tier := kept
	if len(kept) == 0 {
		tier = out
	}
	others := false
	for _, u := range tier {
		others = others || !t.failed[u.Dial]
	}
	// First the upstreams this request has not failed on; those only when no other is left.
	pass := !others
	var free []*reverseproxy.Upstream
	for _, u := range tier {
		if t.failed[u.Dial] == pass && (u.MaxRequests <= 0 || d.busy[u.Dial] < u.MaxRequests) {
			free = append(free, u)
		}
	}
	if len(free) == 0 {
		return nil
	}
	var u *reverseproxy.Upstream
	if t.key != "" {
		u = rendezvous(tier, t.key, free, d.bound(tier, t.header))
	}
	if u == nil {
		u = leastBusy(free, d.busy)
	}
	t.dial = u.Dial
	d.busy[u.Dial]++
	return u
}

// release gives a slot back: to the first POST waiting for its model, at once, or to the pool
// (slotsMu held).
func (d *DrainSelection) release(dial string) {
	for i, w := range d.queue {
		if w.t.model == d.Models[dial] {
			d.queue = append(d.queue[:i:i], d.queue[i+1:]...)
			w.handed = dial
			close(w.ready)
			return
		}
	}
	d.busy[dial]--
}

// queued is how many POSTs for the model wait (slotsMu held).
func (d *DrainSelection) queued(model string) int {
	n := 0
	for _, w := range d.queue {
		if w.t.model == model {
			n++
		}
	}
	return n
}

// depth is how many POSTs may wait for a slot (of one model's upstreams, with several): QueueDepth,
// or queueSlotsFactor times the healthy upstreams' slots (an upstream without a cap is never full,
// so it adds none).
func (d *DrainSelection) depth(pool reverseproxy.UpstreamPool) int {
	if d.QueueDepth != nil {
		return *d.QueueDepth
	}
	n := 0
	for _, u := range pool {
		if u.Healthy() && u.MaxRequests > 0 {
			n += u.MaxRequests
		}
	}
	return queueSlotsFactor * n
}

// rendezvous is the first of `free` in the key's rendezvous order over `tier` (highest score
// first) with fewer than `bound` POSTs in flight, so a conversation keeps its upstream while
// that one stays in the tier and has a slot; nil when none is under the bound.
func rendezvous(tier []*reverseproxy.Upstream, key string, free []*reverseproxy.Upstream, bound func(*reverseproxy.Upstream) bool) *reverseproxy.Upstream {
	order := append([]*reverseproxy.Upstream(nil), tier...)
	sort.SliceStable(order, func(i, j int) bool { return score(key, order[i].Dial) > score(key, order[j].Dial) })
	for _, u := range order {
		for _, f := range free {
			if f == u && bound(u) {
				return u
			}
		}
	}
	return nil
}

// bound is whether an upstream of the tier may take one more request of a conversation: always
// when the client named it, else while it holds no more than boundedLoad times the tier's
// share of the POSTs in flight, this one counted (slotsMu held).
func (d *DrainSelection) bound(tier []*reverseproxy.Upstream, header bool) func(*reverseproxy.Upstream) bool {
	if header {
		return func(*reverseproxy.Upstream) bool { return true }
	}
	total := 1
	for _, u := range tier {
		total += d.busy[u.Dial]
	}
	limit := max(boundedMin, int(math.Ceil(boundedLoad*float64(total)/float64(len(tier)))))
	return func(u *reverseproxy.Upstream) bool { return d.busy[u.Dial] < limit }
}

// peekBody is the first bytes of the request's body: up to prefixLimit, or all of it, or what
// arrived within prefixWait. r.Body is replaced by a reader of the same bytes, whole; nothing is
// read for a body that is absent.
func peekBody(r *http.Request) []byte {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	p := &pumped{chunks: make(chan chunk, 4), done: r.Context().Done()}
	go p.pump(r.Body)
	r.Body = p
	wait := time.NewTimer(prefixWait)
	defer wait.Stop()
	for len(p.cur) < prefixLimit && p.err == nil {
		select {
		case c := <-p.chunks:
			p.cur, p.err = append(p.cur, c.b...), c.err
		case <-wait.C:
			return p.cur
		case <-p.done:
			return p.cur
		}
	}
	return p.cur
}

type chunk struct {
	b   []byte
	err error
}

// pumped gives a body's bytes as a goroutine reads them (peekBody waits on them a bounded
// time; the proxy reads them after). Close leaves the body open, as Caddy's own wrapper does
// for a dial that failed (its retry sends the body again); the server closes it when the
// request ends, which ends the pump.
type pumped struct {
	chunks chan chunk
	done   <-chan struct{}
	cur    []byte
	err    error
}

func (p *pumped) pump(body io.Reader) {
	for {
		b := make([]byte, 32<<10)
		n, err := body.Read(b)
		select {
		case p.chunks <- chunk{b[:n], err}:
		case <-p.done:
			return
		}
		if err != nil {
			return
		}
	}
}

func (p *pumped) Read(b []byte) (int, error) {
	for len(p.cur) == 0 {
		if p.err != nil {
			return 0, p.err
		}
		select {
		case c := <-p.chunks:
			p.cur, p.err = c.b, c.err
		case <-p.done:
			return 0, context.Canceled
		}
	}
	n := copy(b, p.cur)
	p.cur = p.cur[n:]
	return n, nil
}

func (p *pumped) Close() error { return nil }

// promptKey is the conversation a body's beginning names: the chat's messages up to and
// including the first user message (a system prompt alone is shared by many conversations),
// or the first promptBytes of a completion's prompt, hashed; "" when the prefix holds neither.
func promptKey(prefix []byte) string {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	h := fnv.New128a()
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return ""
		}
		switch name {
		case "messages":
			if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
				return ""
			}
			start := dec.InputOffset()
			for dec.More() {
				var m struct {
					Role    string          `json:"role"`
					Content json.RawMessage `json:"content"`
				}
				if err := dec.Decode(&m); err != nil {
					if len(prefix) < prefixLimit {
						return ""
					}
					// Messages longer than the prefix (a long system prompt): as far as it goes.
					_, _ = h.Write(prefix[start:])
					return "messages " + hex.EncodeToString(h.Sum(nil))
				}
				_, _ = h.Write([]byte(m.Role + "\x00"))
				_, _ = h.Write(append(m.Content, 0))
				if m.Role == "user" {
					return "messages " + hex.EncodeToString(h.Sum(nil))
				}
			}
			return ""
		case "prompt":
			// Its first promptBytes, though the prefix may end inside it.
			rest := bytes.TrimLeft(prefix[dec.InputOffset():], " \t\r\n:")
			var p json.RawMessage
			if dec.Decode(&p) == nil {
				rest = p
			}
			_, _ = h.Write(rest[:min(len(rest), promptBytes)])
			return "prompt " + hex.EncodeToString(h.Sum(nil))
		default:
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return ""
			}
		}
	}
	return ""
}

// bodyModel is the `model` a JSON body's beginning names at its top level; "" when it names none
// (or the prefix ends before it).
func bodyModel(prefix []byte) string {
	dec := json.NewDecoder(bytes.NewReader(prefix))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return ""
	}
	for dec.More() {
		tok, err := dec.Token()
		name, ok := tok.(string)
		if err != nil || !ok {
			return ""
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return ""
		}
		if name == "model" {
			var m string
			if json.Unmarshal(v, &m) != nil {
				return ""
			}
			return m
		}
	}
	return ""
}

// score is hash(key, dial), mixed (splitmix64's finalizer) so that dials differing in one
// digit do not order alike.
func score(key, dial string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key))
	_, _ = h.Write([]byte{0})
	_, _ = h.Write([]byte(dial))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	return x ^ x>>31
}

// leastBusy is least_conn: the upstream with the fewest requests in flight (the slots this
// policy counts when `slots` is given, else Caddy's count of every request), ties at random.
func leastBusy(pool []*reverseproxy.Upstream, slots map[string]int) *reverseproxy.Upstream {
	var best *reverseproxy.Upstream
	least, ties := -1, 0
	for _, u := range pool {
		n := u.NumRequests()
		if slots != nil {
			n = slots[u.Dial]
		}
		switch {
		case least < 0 || n < least:
			best, least, ties = u, n, 1
		case n == least:
			ties++
			if rand.IntN(ties) == 0 {
				best = u
			}
		}
	}
	return best
}

var (
	_ reverseproxy.Selector = (*DrainSelection)(nil)
	_ caddy.Provisioner     = (*DrainSelection)(nil)
	_ caddy.CleanerUpper    = (*DrainSelection)(nil)
)

func main() { caddycmd.Main() }
