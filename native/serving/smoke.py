# Runs on the client node: first a streamed chat completion (the server's first request, timed
# to its first token event: the time to first token), then the smoke generation through the
# server's native /completion
# endpoint (greedy: temperature 0, top_k 1, fixed seed and prompt, N tokens, token ids
# returned), then a chat completion through its OpenAI-compatible /v1/chat/completions (what
# clients call: it must answer 200 with a message), then the /completion request against a
# single-node reference of the same build and model (a second llama-server without --rpc on a
# loopback port, as its own transient unit, stopped afterwards). One JSON object on stdout; it
# holds token ids and counts, never the generated text (it goes into no state).
# Around the generation and the chat it reads the byte counters of the interfaces the kernel
# routes the workers' addresses through: the proof that the split's traffic crossed the fabric
# (and not, say, the management network).
# Arguments: URL TOKENS SEED PROMPT BIN REF_UNIT REF_PORT REF_TIMEOUT_S WORKER_ADDRS [REF_FLAGS...]
# WORKER_ADDRS: the workers' IPv4 addresses, comma-separated ("-": no workers).
# No REF_FLAGS: no reference run (the model does not fit the client alone).
# The API key, when the server has one, arrives as SPARKFORM_API_KEY (the secret preamble).
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lib"))  # native/lib/ (inlined on a node)
from nodenet import dev_bytes, listening_inodes  # noqa: E402


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


def healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def systemctl(*args):
    return subprocess.run(["systemctl", "--user", *args], capture_output=True, text=True, timeout=60)


def owns(pid, inodes):
    """Whether process `pid` holds one of the socket `inodes`."""
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return False
    for fd in fds:
        try:
            link = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if link.startswith("socket:[") and link[8:-1] in inodes:
            return True
    return False


def reference(binary, unit, port, timeout_s, flags, prompt, tokens, seed):
    systemctl("stop", f"{unit}.service")
    systemctl("reset-failed", f"{unit}.service")
    # Only a reference this program starts may answer for one node alone: a port someone else
    # listens on is refused, never asked.
    if listening_inodes(port):
        raise SystemExit(
            f"the single-node reference needs 127.0.0.1:{port} (the server's port + 1), and something else "
            "listens there: free that port or move the server's sparkform:server.port"
        )
    state = os.path.expanduser("~/.cache/sparkform/serving")
    os.makedirs(state, exist_ok=True)
    log = f"{state}/{unit}.log"
    argv = [os.path.expanduser(a) if a.startswith("~/") else a for a in flags]
    subprocess.run(
        ["systemd-run", "--user", "--quiet", f"--unit={unit}", "-p", "Type=exec",
         "-p", f"WorkingDirectory={os.path.expanduser('~')}",
         "-p", f"StandardOutput=append:{log}", "-p", f"StandardError=append:{log}",
         os.path.expanduser(binary), *argv],
        check=True, capture_output=True, timeout=60,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.time() + timeout_s
        while not healthy(url):
            if time.time() > deadline:
                tail = open(log, errors="replace").read().splitlines()[-20:]
                raise SystemExit(f"the reference server did not become healthy in {timeout_s} s:\n" + "\n".join(tail))
            time.sleep(0.5)
        pid = systemctl("show", "-p", "MainPID", "--value", f"{unit}.service").stdout.strip()
        if not pid.isdigit() or not owns(int(pid), listening_inodes(port)):
            raise SystemExit(f"127.0.0.1:{port} answers, but not from {unit} (MainPID {pid}): refused as a reference")
        return completion(url, prompt, tokens, seed, "")
    finally:
        systemctl("stop", f"{unit}.service")
        systemctl("reset-failed", f"{unit}.service")
        try:
            os.remove(log)
        except OSError:
            pass


def main(argv):
    url, tokens, seed, prompt = argv[0], int(argv[1]), int(argv[2]), argv[3]
    binary, ref_unit, ref_port, ref_timeout = argv[4], argv[5], int(argv[6]), int(argv[7])
    workers = [] if argv[8] == "-" else argv[8].split(",")
    ref_flags = argv[9:]
    key = os.environ.pop("SPARKFORM_API_KEY", "")
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    devs = route_devs(workers)
    rx0, tx0 = devs_bytes(devs)
    # The server's first request: what a client that arrives as it turns healthy waits for.
    stream = streamed(url, prompt, tokens, seed, key)
    out = completion(url, prompt, tokens, seed, key)
    out["chat"] = chat(url, prompt, tokens, seed, key)
    out["stream"] = stream
    rx1, tx1 = devs_bytes(devs)
    out["fabric"] = {"ifaces": devs, "rxBytes": rx1 - rx0, "txBytes": tx1 - tx0}
    if ref_flags:
        out["reference"] = reference(binary, ref_unit, ref_port, ref_timeout, ref_flags, prompt, tokens, seed)
    else:
        out["reference"] = {"skipped": "no reference flags"}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
