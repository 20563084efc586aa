# The router bench's load (bench/router.ts), run ON the client node so that ssh is not in the
# measurement: `python3 - SPEC < router-load.py`. Python's standard library only (the nodes have
# python3 and no pip).
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
# API_KEY may be defined by the sender above this text (prepended on stdin, so the key is in no
# command line); when set, every request carries `Authorization: Bearer <key>`.
#
# Prints one JSON line: wall seconds (from the start of all clients to the end of the last), each
# successful request's latency (and TTFT) in seconds, completion tokens, failures (HTTP status
# and a short reason), reconnects (a kept-alive connection the server had closed, retried once on
# a fresh one). The generated text is read and dropped: it is never printed.
import http.client
import json
import sys
import threading
import time
import urllib.parse

SPEC = json.loads(sys.argv[1])
KEY = globals().get("API_KEY")
MODE = SPEC["mode"]
URLS = SPEC["urls"]
CLIENTS = int(SPEC["clients"])
REQUESTS = int(SPEC["requests"])
TIMEOUT = float(SPEC.get("timeout", 120))
STREAM = MODE == "ttft"
BODY = json.dumps(
    {
        "messages": [{"role": "user", "content": SPEC["prompt"]}],
        "max_tokens": int(SPEC["maxTokens"]),
        "temperature": 0,
        "seed": 42,
        "cache_prompt": False,
        "stream": STREAM,
    }
).encode()
HEADERS = {"Content-Type": "application/json", "Accept": "application/json"}
if KEY:
    HEADERS["Authorization"] = "Bearer " + KEY
# A stale kept-alive connection fails like this at once; one retry on a fresh connection.
STALE = (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError)


def target(url):
    u = urllib.parse.urlsplit(url)
    if u.scheme != "http":
        raise SystemExit("only http:// URLs: " + url)
    return u.hostname, u.port or 80, u.path.rstrip("/") + "/v1/chat/completions"


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


start = threading.Barrier(CLIENTS + 1)
threads = [threading.Thread(target=client, args=(i, start), daemon=True) for i in range(CLIENTS)]
for t in threads:
    t.start()
start.wait()
t0 = time.perf_counter()
for t in threads:
    t.join()
wall = time.perf_counter() - t0
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
