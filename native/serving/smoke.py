# Runs on the client node: the smoke generation through the server's native /completion
# endpoint (greedy: temperature 0, top_k 1, fixed seed and prompt, N tokens, token ids
# returned), then the same request against a single-node reference of the same build and
# model (a second llama-server without --rpc on a loopback port, as its own transient unit,
# stopped afterwards). One JSON object on stdout.
# Arguments: URL TOKENS SEED PROMPT BIN REF_UNIT REF_PORT REF_TIMEOUT_S [REF_FLAGS...]
# No REF_FLAGS: no reference run (the model does not fit the client alone).
# The API key, when the server has one, arrives as SPARKFORM_API_KEY (the secret preamble).
# llama-server 80fb11ac parses every result's text (common/chat.cpp), and malformed UTF-8 is a
# 500 ("does not match the expected Content-only format"): a model that emits raw bytes (the
# generated test model's vocabulary is 256 byte tokens) is asked again, split and reference
# alike, under a GBNF grammar of printable ASCII; "grammar" in the output says so.
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request


ASCII = "root ::= [ -~]*"


class Unparsable(Exception):
    pass


def post(url, body, key):
    req = urllib.request.Request(
        url + "/completion",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json", **({"Authorization": f"Bearer {key}"} if key else {})},
    )
    try:
        with urllib.request.urlopen(req, timeout=600) as r:
            return json.loads(r.read())
    except urllib.error.HTTPError as e:
        text = e.read(4000).decode("utf-8", "replace")
        if e.code == 500 and "does not match the expected" in text:
            raise Unparsable(text)
        raise SystemExit(f"POST {url}/completion answered {e.code}: {text}")


def completion(url, prompt, tokens, seed, key, grammar=""):
    body = {
        "prompt": prompt,
        "n_predict": tokens,
        "seed": seed,
        "temperature": 0,
        "top_k": 1,
        "cache_prompt": False,
        "return_tokens": True,
        "stream": False,
        **({"grammar": grammar} if grammar else {}),
    }
    out = post(url, body, key)
    return {
        "tokens": [int(t) for t in out.get("tokens", [])],
        "text": out.get("content", ""),
        "tokensPerSecond": float(out.get("timings", {}).get("predicted_per_second", 0.0)),
    }


def healthy(url):
    try:
        with urllib.request.urlopen(url + "/health", timeout=2) as r:
            return r.status == 200
    except Exception:
        return False


def systemctl(*args):
    subprocess.run(["systemctl", "--user", *args], capture_output=True, timeout=60)


def reference(binary, unit, port, timeout_s, flags, prompt, tokens, seed, grammar):
    state = os.path.expanduser("~/.cache/sparkform/serving")
    os.makedirs(state, exist_ok=True)
    log = f"{state}/{unit}.log"
    systemctl("stop", f"{unit}.service")
    systemctl("reset-failed", f"{unit}.service")
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
        return completion(url, prompt, tokens, seed, "", grammar)
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
    ref_flags = argv[8:]
    key = os.environ.pop("SPARKFORM_API_KEY", "")
    os.environ.setdefault("XDG_RUNTIME_DIR", f"/run/user/{os.getuid()}")
    grammar = ""
    try:
        out = completion(url, prompt, tokens, seed, key)
    except Unparsable:
        grammar = ASCII
        out = completion(url, prompt, tokens, seed, key, grammar)
    out["grammar"] = grammar
    if ref_flags:
        out["reference"] = reference(
            binary, ref_unit, ref_port, ref_timeout, ref_flags, prompt, tokens, seed, grammar
        )
    else:
        out["reference"] = {"skipped": "no reference flags"}
    return out


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:])))
