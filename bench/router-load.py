# The router benches' load (bench/router.ts, bench/router-sticky.ts), run ON the client node so
# that ssh is not in the measurement: `python3 - SPEC < router-load.py`. Python's standard library
# only (the nodes have python3 and no pip).
#
# SPEC (JSON): {"mode": "load" | "ttft", "urls": [base URL, ...], "clients": N, "requests": R,
#               "maxTokens": 8, "prompt": "...", "timeout": 120}
# N clients (threads), started together, each sends R requests one after another:
# POST <url>/v1/chat/completions, temperature 0, cache_prompt false (so every request processes
# its prompt), on a keep-alive connection of its own per URL (as OpenAI clients pool them).
# Request j of client i goes to urls[(i + j) % len(urls)]: one URL, or the requests spread over
# several servers with no router. Mode "ttft" streams (stream: true) and also times each
# request's first `data:` chunk carrying content.
#
# Mode "conversation" (issue 37, sticky vs round-robin): {"mode": "conversation", "urls": [...],
#   "route": "same" | "alternate", "header": bool, "seed": "...", "conversations": N,
#   "words": W, "maxTokens": [first, second], "timeout": 120}
# One client, the conversations one after another, each two non-streamed turns with
# cache_prompt true (llama-server's default, said explicitly: the KV cache is what is measured):
# a system prompt and a user message of W words made from the seed (distinct per conversation),
# then the whole history (the answer as received) and a short user message. Conversation i's
# first turn goes to urls[i % n], its second to the same URL ("same") or the next ("alternate":
# what a round-robin proxy does to it); with "header" both carry X-Conversation-Id. Per turn:
# status, latency, and the prompt tokens served from cache as the server reports them
# (timings.cache_n and timings.prompt_n, usage.prompt_tokens_details.cached_tokens and
# usage.prompt_tokens: each null when absent, so the bench says which it read).
#
# Mode "burst" (a burst past the slots): {"mode": "burst", "urls": [the router], "clients": N,
#   "maxTokens": M, "prompt": "...", "tries": 5, "slots": [server base URL, ...], "poll": 0.05,
#   "timeout": 120}
# N clients started together, each one non-streamed request (ignore_eos, so it generates M
# tokens), retried as the OpenAI SDKs retry: on 408, 409, 429, 5xx or a connection error (and
# as x-should-retry says), up to `tries` tries, after retry-after-ms, else Retry-After (seconds,
# or an HTTP date), else the SDK's backoff (0.5 s doubling to 8 s, minus up to 25% jitter).
# Per request every try's status, Retry-After and latency, the seconds slept, the final status
# and the server's own seconds (timings.prompt_ms + predicted_ms), so the bench can tell the
# time a request waited before its server took it. Meanwhile a thread reads GET /slots of each
# of `slots` every `poll` seconds: the most slots processing at once per server.
#
# API_KEY may be defined by the sender above this text (prepended on stdin, so the key is in no
# command line); when set, every request carries `Authorization: Bearer <key>`.
#
# Prints one JSON line. Load and ttft: wall seconds (from the start of all clients to the end of
# the last), each successful request's latency (and TTFT) in seconds, completion tokens,
# failures (HTTP status and a short reason), reconnects (a kept-alive connection the server had
# closed, retried once on a fresh one). The generated text is read and dropped: it is never
# printed (a conversation keeps its first answer in memory for the second turn only).
import email.utils
import hashlib
import http.client
import json
import random
import sys
import threading
import time
import urllib.parse

SPEC = json.loads(sys.argv[1])
KEY = globals().get("API_KEY")
MODE = SPEC["mode"]
URLS = SPEC["urls"]
CLIENTS = int(SPEC.get("clients", 1))
REQUESTS = int(SPEC.get("requests", 1))
TIMEOUT = float(SPEC.get("timeout", 120))
STREAM = MODE == "ttft"


def one_prompt_body(**more):
    """The request body of the load, ttft and burst modes: SPEC's prompt, greedy, seeded."""
    return {
        "messages": [{"role": "user", "content": SPEC["prompt"]}],
        "max_tokens": int(SPEC["maxTokens"]),
        "temperature": 0,
        "seed": 42,
        **more,
    }


if MODE in ("load", "ttft"):
    BODY = json.dumps(one_prompt_body(cache_prompt=False, stream=STREAM)).encode()
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
if KEY:
    HEADERS["Authorization"] = "Bearer " + KEY
# A stale kept-alive connection fails like this at once; one retry on a fresh connection.
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def target(url, path="/v1/chat/completions"):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http":
        raise SystemExit("only http:// URLs: " + url)
    return u.hostname, u.port or 80, u.path.rstrip("/") + path


TARGETS = [target(u) for u in URLS]
lock = threading.Lock()
latencies, ttfts, failures = [], [], []
totals = {"tokens": 0, "reconnects": 0}


def short(s):
    s = " ".join(str(s).split())
    return s[:160]


def reason(status, raw):
    """The error's message from llama-server's or the router's body (no request text in it)."""
    try:
        e = json.loads(raw.decode("utf-8", "replace")).get("error", {})
        return short(e.get("message", "") if isinstance(e, dict) else e)
    except Exception:
        return short(raw.decode("utf-8", "replace"))


def read_stream(resp, t0):
    """(ttft, completion tokens) of an SSE stream: content chunks are counted, never kept."""
    first, chunks, usage = None, 0, None
    while True:
        line = resp.readline()
        if not line:
            break
        line = line.strip()
        if not line.startswith(b"data:"):
            continue
        payload = line[5:].strip()
        if payload == b"[DONE]":
            break
        try:
            d = json.loads(payload)
        except ValueError:
            continue
        if d.get("usage"):
            usage = d["usage"].get("completion_tokens", usage)
        for c in d.get("choices") or []:
            if (c.get("delta") or {}).get("content"):
                chunks += 1
                if first is None:
                    first = time.perf_counter() - t0
    resp.read()  # the rest, so the connection can be used again
    return first, usage if usage is not None else chunks


def one(conns, k):
    host, port, path = TARGETS[k]
    for attempt in (0, 1):
        conn = conns.get(k)
        reused = conn is not None and conn.sock is not None
        if conn is None:
            conn = conns[k] = http.client.HTTPConnection(host, port, timeout=TIMEOUT)
        t0 = time.perf_counter()
        try:
            conn.request("POST", path, body=BODY, headers=HEADERS)
            resp = conn.getresponse()
            if resp.status != 200:
                raw = resp.read()
                return {"status": resp.status, "error": reason(resp.status, raw)}
            if STREAM:
                first, tokens = read_stream(resp, t0)
                if first is None:
                    return {"status": 200, "error": "the stream carried no content"}
            else:
                d = json.loads(resp.read())
                tokens = int((d.get("usage") or {}).get("completion_tokens", 0))
                first = None
            t = time.perf_counter() - t0
            with lock:
                latencies.append(t)
                if first is not None:
                    ttfts.append(first)
                totals["tokens"] += tokens
            return None
        except STALE as e:
            conn.close()
            if reused and attempt == 0:
                with lock:
                    totals["reconnects"] += 1
                continue
            return {"status": 0, "error": short(type(e).__name__ + ": " + str(e))}
        except Exception as e:
            conn.close()
            return {"status": 0, "error": short(type(e).__name__ + ": " + str(e))}


def client(i, start):
    conns = {}
    start.wait()
    for j in range(REQUESTS):
        f = one(conns, (i + j) % len(TARGETS))
        if f is not None:
            with lock:
                failures.append(f)
    for c in conns.values():
        c.close()


def run_clients(work):
    """Seconds from CLIENTS threads' start together (work(i, barrier) waits on it) to the last
    one's end."""
    start = threading.Barrier(CLIENTS + 1)
    threads = [threading.Thread(target=work, args=(i, start), daemon=True) for i in range(CLIENTS)]
    for t in threads:
        t.start()
    start.wait()
    t0 = time.perf_counter()
    for t in threads:
        t.join()
    return time.perf_counter() - t0


def run_load():
    wall = run_clients(client)
    print(
        json.dumps(
            {
                "mode": MODE,
                "clients": CLIENTS,
                "requests": REQUESTS,
                "wall": round(wall, 6),
                "ok": len(latencies),
                "latencies": [round(x, 6) for x in latencies],
                "ttft": [round(x, 6) for x in ttfts],
                "completionTokens": totals["tokens"],
                "reconnects": totals["reconnects"],
                "failures": failures,
            }
        )
    )


# Conversations: words that tokenize to about one token each in most vocabularies, so W words
# are about W tokens of prompt.
WORDS = (
    "the sea ship wind blue harbor sail storm wave sand shell rope deck crew map star night "
    "light moon tide fish gull rock cliff boat oar net salt river cloud rain sun morning road "
    "town market bread apple garden tree stone bridge lamp door window house fire table book "
    "song bell field horse hill snow winter summer green red small old new quiet"
).split()
SYSTEM = "You are a helpful assistant. Answer in one short sentence."
FOLLOW_UP = "Say that again in fewer words."
CONVERSATION_HEADER = "X-Conversation-Id"


def story(seed, i, words):
    """Conversation i's first user message: W words picked by a hash of (seed, i, position)."""
    out = []
    for j in range(words):
        h = hashlib.sha256(f"{seed}/{i}/{j}".encode()).digest()
        out.append(WORDS[h[0] % len(WORDS)])
    # A short id, not the seed itself: on small slots (the simulated cluster's model reads about
    # a token per character, 256 per slot) every character of fixed text is a token less for W.
    tag = hashlib.sha256(f"{seed}/{i}".encode()).hexdigest()[:6]
    return f"Story {tag}: " + " ".join(out) + ". What is it about?"


def post(url_target, body, headers, timeout):
    """(status, headers, parsed JSON or raw bytes, seconds) of one POST on a fresh connection."""
    host, port, path = url_target
    conn = http.client.HTTPConnection(host, port, timeout=timeout)
    t0 = time.perf_counter()
    try:
        conn.request("POST", path, body=json.dumps(body).encode(), headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        t = time.perf_counter() - t0
        data = None
        if resp.status == 200:
            try:
                data = json.loads(raw)
            except ValueError:
                data = None
        return resp.status, resp, data if data is not None else raw, t
    finally:
        conn.close()


def num(d, *keys):
    """d[k1][k2]… when every step is there and the end is a number, else None."""
    for k in keys:
        if not isinstance(d, dict) or k not in d:
            return None
        d = d[k]
    return d if isinstance(d, (int, float)) and not isinstance(d, bool) else None


def cache_fields(d):
    return {
        "cacheN": num(d, "timings", "cache_n"),
        "promptN": num(d, "timings", "prompt_n"),
        "cachedTokens": num(d, "usage", "prompt_tokens_details", "cached_tokens"),
        "promptTokens": num(d, "usage", "prompt_tokens"),
        "completionTokens": num(d, "usage", "completion_tokens") or 0,
    }


def run_conversation():
    seed = str(SPEC["seed"])
    n = int(SPEC["conversations"])
    words = int(SPEC["words"])
    first_tokens, second_tokens = (int(x) for x in SPEC["maxTokens"])
    alternate = SPEC.get("route") == "alternate"
    turns = []
    t_all = time.perf_counter()
    for i in range(n):
        # No system prompt where the spec says so (small slots): the same for every variant.
        messages = [{"role": "system", "content": SYSTEM}] if SPEC.get("system", True) else []
        messages.append({"role": "user", "content": story(seed, i, words)})
        headers = dict(HEADERS)
        if SPEC.get("header"):
            headers[CONVERSATION_HEADER] = f"{seed}-{i}"
        for turn, max_tokens in ((1, first_tokens), (2, second_tokens)):
            k = (i + (1 if alternate and turn == 2 else 0)) % len(TARGETS)
            body = {
                "messages": messages,
                "max_tokens": max_tokens,
                "temperature": 0,
                "seed": 42,
                "cache_prompt": True,
                "stream": False,
            }
            row = {"conversation": i, "turn": turn, "server": k}
            try:
                status, _, data, t = post(TARGETS[k], body, headers, TIMEOUT)
            except Exception as e:
                row.update(status=0, latency=None, error=short(type(e).__name__ + ": " + str(e)))
                turns.append(row)
                break
            row.update(status=status, latency=round(t, 6))
            if status != 200 or not isinstance(data, dict):
                row["error"] = reason(status, data if isinstance(data, bytes) else b"")
                turns.append(row)
                break
            row.update(cache_fields(data))
            turns.append(row)
            if turn == 1:
                choices = data.get("choices") or [{}]
                answer = (choices[0].get("message") or {}).get("content") or ""
                messages = messages + [
                    {"role": "assistant", "content": answer},
                    {"role": "user", "content": FOLLOW_UP},
                ]
    wall = time.perf_counter() - t_all
    print(json.dumps({"mode": MODE, "wall": round(wall, 6), "turns": turns}))


def retry_wait(resp, retries_done):
    """Seconds the OpenAI SDK waits before its next try (its retryRequest): retry-after-ms,
    else Retry-After as seconds or an HTTP date, else exponential backoff with jitter."""
    wait = None
    if resp is not None:
        ms = resp.getheader("retry-after-ms")
        try:
            wait = float(ms) / 1000 if ms else None
        except ValueError:
            wait = None
        after = resp.getheader("retry-after")
        if after and not wait:
            try:
                wait = float(after)
            except ValueError:
                try:
                    wait = email.utils.parsedate_to_datetime(after).timestamp() - time.time()
                except (TypeError, ValueError):
                    wait = None
    if wait is None:
        wait = min(0.5 * 2**retries_done, 8.0) * (1 - random.random() * 0.25)
    return max(0.0, wait)


def should_retry(status, resp):
    says = resp.getheader("x-should-retry") if resp is not None else None
    if says in ("true", "false"):
        return says == "true"
    return status == 0 or status in (408, 409, 429) or status >= 500


def burst_client(start, t_base, out, idx):
    tries = int(SPEC.get("tries", 5))
    body = one_prompt_body(ignore_eos=True, stream=False)
    attempts, slept = [], 0.0
    start.wait()
    t0 = time.perf_counter()
    row = {"status": 0}
    for n in range(tries):
        sent = time.perf_counter()
        resp, data = None, None
        try:
            status, resp, data, t = post(TARGETS[0], body, HEADERS, TIMEOUT)
            a = {
                "status": status,
                "latency": round(t, 6),
                "retryAfter": resp.getheader("retry-after"),
            }
            if status != 200:
                a["error"] = reason(status, data if isinstance(data, bytes) else b"")
        except Exception as e:
            status = 0
            a = {
                "status": 0,
                "latency": round(time.perf_counter() - sent, 6),
                "retryAfter": None,
                "error": short(type(e).__name__ + ": " + str(e)),
            }
        attempts.append(a)
        row = {"status": status}
        if status == 200 and isinstance(data, dict):
            prompt_ms = num(data, "timings", "prompt_ms")
            predicted_ms = num(data, "timings", "predicted_ms")
            server = None
            if prompt_ms is not None and predicted_ms is not None:
                server = (prompt_ms + predicted_ms) / 1000
            end = time.perf_counter()
            row.update(
                serverSeconds=None if server is None else round(server, 6),
                sent=round(sent - t_base, 6),
                end=round(end - t_base, 6),
                completionTokens=num(data, "usage", "completion_tokens") or 0,
            )
            break
        if n + 1 == tries or not should_retry(status, resp):
            break
        w = retry_wait(resp, n)
        a["slept"] = round(w, 6)
        slept += w
        time.sleep(w)
    row.update(attempts=attempts, total=round(time.perf_counter() - t0, 6), slept=round(slept, 6))
    out[idx] = row


def poll_slots(url, stop, out):
    """The most slots processing at once on one server, read every `poll` seconds."""
    host, port, path = target(url, "/slots")
    r = {"url": url, "max": 0, "slots": None, "polls": 0, "error": None}
    out.append(r)
    interval = float(SPEC.get("poll", 0.05))
    while not stop.is_set():
        conn = http.client.HTTPConnection(host, port, timeout=5)
        try:
            conn.request("GET", path, headers=HEADERS)
            resp = conn.getresponse()
            raw = resp.read()
            if resp.status != 200:
                r["error"] = f"GET /slots answered {resp.status}: {reason(resp.status, raw)}"
                return
            slots = json.loads(raw)
            busy = sum(1 for s in slots if isinstance(s, dict) and s.get("is_processing"))
            r.update(max=max(r["max"], busy), slots=len(slots), polls=r["polls"] + 1)
        except Exception as e:
            r["error"] = short(type(e).__name__ + ": " + str(e))
            return
        finally:
            conn.close()
        stop.wait(interval)


def run_burst():
    out = [None] * CLIENTS
    slots, stop = [], threading.Event()
    pollers = [
        threading.Thread(target=poll_slots, args=(u, stop, slots), daemon=True)
        for u in SPEC.get("slots", [])
    ]
    for p in pollers:
        p.start()
    t_base = time.perf_counter()
    wall = run_clients(lambda i, start: burst_client(start, t_base, out, i))
    stop.set()
    for p in pollers:
        p.join()
    print(
        json.dumps(
            {
                "mode": MODE,
                "clients": CLIENTS,
                "wall": round(wall, 6),
                "requests": out,
                "slots": slots,
            }
        )
    )


{"load": run_load, "ttft": run_load, "conversation": run_conversation, "burst": run_burst}[MODE]()
