// native/model/model-fetch.py and the hub token (issue 10 item 10), and a malformed response
// (item 13), against the real test endpoint (sim/hub) serving https and plain http on one port
// with a self-signed certificate made here by openssl; the script trusts it through
// SSL_CERT_FILE, as a private endpoint's CA would be given. The endpoint's log records, per
// request, whether it came over TLS and whether it carried an Authorization header.
import { execFileSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { execa } from "execa";
import { afterAll, beforeAll, beforeEach, describe, expect, it } from "vitest";
import { FETCH_SCRIPT } from "../../components/model/provider";
import {
  publishTestModel,
  startHfEndpoint,
  type HfEndpoint,
  type PublishedFile,
  type PublishedRepo,
} from "../../sim/hub";

const TOKEN = "hf_unit_token_never_in_clear_0123456789";
let tmp: string;
let ca: string;
let ep: HfEndpoint;
let other: HfEndpoint;
let pub: PublishedRepo & { model: PublishedFile };
let dir: string;
let n = 0;

beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-fetch-token-"));
  const key = path.join(tmp, "key.pem");
  ca = path.join(tmp, "cert.pem");
  execFileSync(
    "openssl",
    [
      ...["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"],
      ...["-nodes", "-days", "1", "-subj", "/CN=127.0.0.1"],
      ...["-addext", "subjectAltName=IP:127.0.0.1", "-keyout", key, "-out", ca],
    ],
    { stdio: "ignore" },
  );
  pub = publishTestModel(path.join(tmp, "hub"));
  const tls = { key: fs.readFileSync(key, "utf8"), cert: fs.readFileSync(ca, "utf8") };
  ep = await startHfEndpoint({ root: path.join(tmp, "hub"), token: TOKEN, tls });
  other = await startHfEndpoint({ root: path.join(tmp, "hub"), tls });
});
afterAll(async () => {
  await ep?.close();
  await other?.close();
  fs.rmSync(tmp, { recursive: true, force: true });
});
beforeEach(() => {
  ep.setFaults({});
  ep.clearLog();
  other.clearLog();
  dir = path.join(tmp, `models-${++n}`, pub.repo, pub.commit);
});

async function fetch(url: string) {
  const spec = {
    dir,
    repo: pub.repo,
    retries: 0,
    progressEvery: 0,
    files: [{ path: pub.model.path, size: pub.model.size, sha256: pub.model.sha256, url }],
  };
  const r = await execa("python3", [FETCH_SCRIPT, "fetch", JSON.stringify(spec)], {
    reject: false,
    extendEnv: false,
    env: { PATH: process.env.PATH ?? "/usr/bin:/bin", HF_TOKEN: TOKEN, SSL_CERT_FILE: ca },
  });
  return { status: r.exitCode, stderr: String(r.stderr) };
}
const fileUrl = (base: string) => `${base}/${pub.repo}/resolve/${pub.commit}/${pub.model.path}`;
const placed = () => fs.existsSync(path.join(dir, pub.model.path));

describe("model-fetch.py never sends the hub token in clear", () => {
  it("downloads over https with the token (the CA from SSL_CERT_FILE)", async () => {
    const r = await fetch(fileUrl(ep.httpsUrl!));
    expect([r.status, r.stderr]).toEqual([0, ""]);
    expect(placed()).toBe(true);
    expect(ep.log().map((e) => [e.tls, e.auth, e.status])).toEqual([[true, true, 200]]);
  });

  it("an https URL redirected to http on the same host and port is refused: nothing in clear", async () => {
    ep.setFaults({ redirectTo: ep.url });
    const r = await fetch(fileUrl(ep.httpsUrl!));
    // The one request is the TLS one; no request came in clear, with or without the token.
    expect(ep.log().map((e) => [e.tls, e.auth, e.status])).toEqual([[true, true, 302]]);
    expect(r.status).toBe(6);
    expect(r.stderr).toMatch(
      /redirected from https to http:\/\/127\.0\.0\.1:\d+: refusing the downgrade/,
    );
    expect(placed()).toBe(false);
  });

  it("a redirect to another origin (https, another port) drops the token", async () => {
    ep.setFaults({ redirectTo: other.httpsUrl });
    const r = await fetch(fileUrl(ep.httpsUrl!));
    expect([r.status, r.stderr]).toEqual([0, ""]);
    expect(ep.log().map((e) => [e.tls, e.auth, e.status])).toEqual([[true, true, 302]]);
    expect(other.log().map((e) => [e.tls, e.auth, e.status])).toEqual([[true, false, 200]]);
  });

  it("plain http with a token only to loopback; any other host is refused before connecting", async () => {
    const r = await fetch(fileUrl(ep.url)); // 127.0.0.1: the local endpoint
    expect(r.status).toBe(0);
    expect(ep.log().map((e) => [e.tls, e.auth])).toEqual([[false, true]]);
    dir = path.join(tmp, `models-${++n}`, pub.repo, pub.commit);
    const far = await fetch(fileUrl("http://192.0.2.10:9"));
    expect(far.status).toBe(6);
    expect(far.stderr).toContain(
      "refusing to send the hub token over plain http to 192.0.2.10: it would travel in clear",
    );
  });

  it("an endpoint URL with user-info or a query string is refused", async () => {
    const u = new URL(fileUrl(ep.httpsUrl!));
    const withUser = `https://user:pw-0123@${u.host}${u.pathname}`;
    let r = await fetch(withUser);
    expect(r.status).toBe(6);
    expect(r.stderr).toContain("has user-info (user:password@)");
    expect(r.stderr).not.toContain("pw-0123");
    r = await fetch(`${fileUrl(ep.httpsUrl!)}?token=x`);
    expect(r.status).toBe(6);
    expect(r.stderr).toContain("has a query string");
    expect(ep.log()).toEqual([]);
  });
});

describe("model-fetch.py on a malformed response", () => {
  it("a non-numeric Content-Length is a clear error, not a traceback", async () => {
    ep.setFaults({ contentLength: "12abc" });
    const r = await fetch(fileUrl(ep.httpsUrl!));
    expect(r.status).toBe(5);
    expect(r.stderr).toContain("the server sent a Content-Length that is not a number ('12abc')");
    expect(r.stderr).not.toContain("Traceback");
    expect(placed()).toBe(false);
  });
});
