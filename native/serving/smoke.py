# Runs on the client node: first a streamed chat completion (the server's first request, timed
# to its first token event: the time to first token), then the smoke generation through the
# server's native /completion endpoint (greedy: temperature 0, top_k 1, fixed seed and prompt,
# N tokens, token ids returned), then a chat completion through its OpenAI-compatible
# /v1/chat/completions (what clients call: it must answer 200 with a message). One JSON object
# on stdout; it holds token ids and counts, never the generated text (it goes into no state).
# Around the generation and the chat it reads the byte counters of the interfaces the kernel
# routes the workers' addresses through: the proof that the split's traffic crossed the fabric
# (and not, say, the management network).
# With --reference, only the /completion request, against the single-node reference (a second
# llama-server without --rpc on a loopback port): native/unit/start.sh starts it as every
# supervised server starts (the build's digest checked, a port someone else holds refused) and
# stop.sh stops it, so this program only asks it.
# With --apis, one tiny request (one token) to each of the other APIs clients speak: the
# Anthropic Messages API (/v1/messages, the key in that API's own header, x-api-key) and
# the OpenAI Responses API (/v1/responses). Per API only the HTTP status and the answer's type
# field ("message", "response"), never its text; the control node judges them
# (components/serving/apis.ts, apiVerdicts): a build without the route answers 404.
# Arguments: URL TOKENS SEED PROMPT WORKER_ADDRS | --reference URL TOKENS SEED PROMPT
# | --apis URL PROMPT
# WORKER_ADDRS: the workers' IPv4 addresses, comma-separated ("-": no workers).
# The API key, when the server has one, arrives as SPARKFORM_API_KEY (the secret preamble); the
# reference has none.
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from nodenet import dev_bytes  # noqa: E402


def post(url, path, body, key):
    req = urllib.request.Request(
        url + path,
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        raise SystemExit(f"POST {url}{path} answered {e.code}: {e.read(4000).decode('utf-8', 'replace')}")


def completion(url, prompt, tokens, seed, key):
    body = {
        "prompt": prompt,
        "n_predict": tokens,
        "seed": seed,
        "temperature": 0,
        "top_k": 1,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
    }
    out = post(url, "/completion", body, key)
    return {
        "tokens": [int(t) for t in out.get("tokens", [])],
        "tokensPerSecond": float(out.get("timings", {}).get("predicted_per_second", 0.0)),
    }


def chat(url, prompt, tokens, seed, key):
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "seed": seed,
        "temperature": 0,
        "stream": False,
    }
    out = post(url, "/v1/chat/completions", body, key)
    choice = (out.get("choices") or [{}])[0]
    content = (choice.get("message") or {}).get("content")
    if not isinstance(content, str):
        raise SystemExit(f"POST {url}/v1/chat/completions answered 200 without a message: {json.dumps(out)[:2000]}")
    usage = out.get("usage") or {}
    return {
        "completionTokens": int(usage.get("completion_tokens", 0)),
        "finishReason": str(choice.get("finish_reason") or ""),
        "characters": len(content),
    }


def streamed(url, prompt, tokens, seed, key):
    """A streamed chat completion (server-sent events), timed from the request to the first
    event that carries generated text (a delta's content or reasoning_content; the role-only
    first chunk is not a token). Only the timing and counts are kept, never the text."""
    body = {
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": tokens,
        "seed": seed,
        "temperature": 0,
        "stream": True,
        # The first token of a fresh prompt, not of one an earlier request left in the slot.
        "cache_prompt": False,
    }
    req = urllib.request.Request(
        url + "/v1/chat/completions",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    where = f"the streamed POST {url}/v1/chat/completions"
    t0 = time.monotonic()
    first = None
    events = 0
    done = False
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            for raw in r:
                line = raw.decode("utf-8", "replace").strip()
                if line.startswith("error:"):
                    raise SystemExit(f"{where} answered an error event: {line[:2000]}")
                if not line.startswith("data:"):
                    continue
                data = line[5:].strip()
                if data == "[DONE]":
                    done = True
                    break
                try:
                    chunk = json.loads(data)
                except ValueError:
                    raise SystemExit(f"{where} sent an event that is not JSON ({len(data)} characters)") from None
                if not isinstance(chunk, dict):
                    raise SystemExit(f"{where} sent an event that is not a JSON object")
                if "error" in chunk:
                    raise SystemExit(f"{where} answered an error event: {json.dumps(chunk['error'])[:2000]}")
                for choice in chunk.get("choices") or []:
                    delta = choice.get("delta") or {}
                    if any(isinstance(delta.get(k), str) and delta.get(k) for k in ("content", "reasoning_content")):
                        if first is None:
                            first = time.monotonic() - t0
                        events += 1
    except urllib.error.HTTPError as e:
        raise SystemExit(f"{where} answered {e.code}: {e.read(4000).decode('utf-8', 'replace')}")
    if first is None:
        raise SystemExit(f"{where} sent no token before {'its [DONE]' if done else 'the stream closed'}")
    return {"firstTokenSeconds": round(first, 4), "tokenEvents": events}


# Per API: its path, the body of a one-token request, the key in the header the API documents,
# and the field of the answer that names its type.
APIS = {
    "messages": {
        "path": "/v1/messages",
        "body": lambda prompt: {
            "model": "sparkform",
            "max_tokens": 1,
            "messages": [{"role": "user", "content": prompt}],
        },
        "headers": lambda key: {
            "anthropic-version": "2023-06-01",
            **({"x-api-key": key} if key else {}),
        },
        "type": "type",
    },
    "responses": {
        "path": "/v1/responses",
        "body": lambda prompt: {"model": "sparkform", "max_output_tokens": 1, "input": prompt},
        "headers": lambda key: {"Authorization": f"Bearer {key}"} if key else {},
        "type": "object",
    },
}


def api_probe(url, api, prompt, key):
    """One request to `api`: its status, the answer's type field, and, when it is not 200, the
    start of the server's error (it names what was refused; a 200's text is never kept)."""
    a = APIS[api]
    req = urllib.request.Request(
        url + a["path"],
        data=json.dumps(a["body"](prompt)).encode(),
        headers={"Content-Type": "application/json", **a["headers"](key)},
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        return {"status": e.code, "type": "", "error": e.read(2000).decode("utf-8", "replace")}
    try:
        out = json.loads(raw)
    except ValueError:
        out = None
    kind = out.get(a["type"]) if isinstance(out, dict) else None
    return {"status": status, "type": kind if isinstance(kind, str) else "", "error": ""}


def route_devs(addrs):
    """The interfaces the kernel sends to each of `addrs` through (`ip -o route get`)."""
    devs = []
    for addr in addrs:
        r = subprocess.run(["ip", "-o", "route", "get", addr], capture_output=True, text=True, timeout=10)
        f = r.stdout.split()
        if r.returncode != 0 or "dev" not in f[:-1]:
            raise SystemExit(f"no route to the worker {addr} on the client node: {(r.stderr or r.stdout).strip()[:500]}")
        dev = f[f.index("dev") + 1]
        if dev not in devs:
            devs.append(dev)
    return devs


def devs_bytes(devs):
    """rx and tx bytes of `devs`, summed."""
    rx = tx = 0
    for dev in devs:
        r, t = dev_bytes(dev)
        rx, tx = rx + r, tx + t
    return rx, tx


def main(argv):
    if argv[:1] == ["--apis"]:
        url, prompt = argv[1], argv[2]
        key = os.environ.pop("SPARKFORM_API_KEY", "")
        return {api: api_probe(url, api, prompt, key) for api in APIS}
    if argv[:1] == ["--reference"]:
        url, tokens, seed, prompt = argv[1], int(argv[2]), int(argv[3]), argv[4]
        return completion(url, prompt, tokens, seed, "")
    url, tokens, seed, prompt = argv[0], int(argv[1]), int(argv[2]), argv[3]
    workers = [] if argv[4] == "-" else argv[4].split(",")
    key = os.environ.pop("SPARKFORM_API_KEY", "")
    devs = route_devs(workers)
    rx0, tx0 = devs_bytes(devs)
    # The server's first request: what a client that arrives as it turns healthy waits for.
    stream = streamed(url, prompt, tokens, seed, key)
    out = completion(url, prompt, tokens, seed, key)
    out["chat"] = chat(url, prompt, tokens, seed, key)
    out["stream"] = stream
    rx1, tx1 = devs_bytes(devs)
    out["fabric"] = {"ifaces": devs, "rxBytes": rx1 - rx0, "txBytes": tx1 - tx0}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
