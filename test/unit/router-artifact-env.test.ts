// Issue 33 item 2: the Go toolchain never sees the stack's decrypted secrets. The program reads
// the Go version without starting `go` (the Go install's VERSION file, and go.mod's go line);
// the provider's `go build` gets childEnv() plus Go's own variables, not process.env. A
// stand-in `go` first on PATH records every environment it is started with.
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  goBuildEnv,
  routerArtifactId,
  routerBinary,
  toolchainVersion,
} from "../../components/router/artifact";

const SENTINEL = "SENTINEL_serverApiKey_7f3a";
let tmp: string;
let record: string;
const saved = { ...process.env };

beforeAll(() => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), "sparkform-go-env-"));
  record = path.join(tmp, "record");
  // A Go install of its own: bin/go and VERSION, as /usr/local/go has them.
  const root = path.join(tmp, "go");
  fs.mkdirSync(path.join(root, "bin"), { recursive: true });
  fs.writeFileSync(path.join(root, "VERSION"), "go1.26.8\ntime 2026-08-28T16:20:06Z\n");
  fs.writeFileSync(
    path.join(root, "bin", "go"),
    "#!/bin/sh\n" +
      `{ echo "=== go $*"; env; } >> '${record}'\n` +
      'if [ "$1" = env ]; then echo go1.26.8; exit 0; fi\n' +
      'if [ "$1" = build ]; then while [ $# -gt 0 ]; do if [ "$1" = -o ]; then shift; echo built > "$1"; fi; shift; done; exit 0; fi\n' +
      "exit 2\n",
    { mode: 0o755 },
  );
  process.env.PATH = `${path.join(root, "bin")}:${process.env.PATH ?? ""}`;
  process.env.SPARKFORM_CACHE_DIR = path.join(tmp, "cache");
  process.env.PULUMI_CONFIG = JSON.stringify({
    "sparkform:serverApiKey": SENTINEL,
    "sparkform:hfToken": `hf_${SENTINEL}`,
  });
  process.env.AWS_SECRET_ACCESS_KEY = SENTINEL;
  process.env.GOPROXY = "https://proxy.example,direct";
  process.env.GOFLAGS = "-mod=mod -tags=x";
  process.env.HTTPS_PROXY = "http://proxy.example:3128";
});

afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in saved)) delete process.env[k];
  Object.assign(process.env, saved);
  fs.rmSync(tmp, { recursive: true, force: true });
});

const recorded = () => (fs.existsSync(record) ? fs.readFileSync(record, "utf8") : "");

describe("the router's Go toolchain and the stack's secrets", () => {
  it("the program's artifact id starts no `go` (the version comes from the Go install's VERSION)", () => {
    const id = routerArtifactId("x86_64");
    expect(recorded()).toBe("");
    expect(id.version).toBe("v2.11.9");
    // The same key `go env GOVERSION` gave: go1.26.8 here, a warm cache stays warm.
    expect(toolchainVersion()).toBe("go1.26.8");
  });

  it("`go build` gets no PULUMI_CONFIG, no secret, and Go's own variables", async () => {
    const a = await routerBinary({ arch: "x86_64" });
    expect(fs.readFileSync(a.path, "utf8")).toBe("built\n");
    const env = recorded();
    expect(env).toMatch(/^=== go build /m);
    expect(env).not.toContain("PULUMI_CONFIG");
    expect(env).not.toContain(SENTINEL);
    expect(env).toMatch(/^GOPROXY=https:\/\/proxy\.example,direct$/m);
    expect(env).toMatch(/^HTTPS_PROXY=http:\/\/proxy\.example:3128$/m);
    expect(env).toMatch(/^GOFLAGS=-tags=x -mod=readonly$/m);
    expect(env).toMatch(/^CGO_ENABLED=0$/m);
    expect(env).toMatch(/^GOOS=linux$/m);
    expect(env).toMatch(/^GOARCH=amd64$/m);
  });

  it("goBuildEnv passes the named Go variables only", () => {
    const env = goBuildEnv("arm64", {
      PATH: "/bin",
      HOME: "/home/op",
      PULUMI_CONFIG: "{}",
      GOPATH: "/gp",
      GOMODCACHE: "/gp/mod",
      GOFLAGS: "-mod=vendor",
      no_proxy: "localhost",
      AWS_SECRET_ACCESS_KEY: "x",
    });
    expect(env).toEqual({
      PATH: "/bin",
      HOME: "/home/op",
      GOPATH: "/gp",
      GOMODCACHE: "/gp/mod",
      no_proxy: "localhost",
      GOFLAGS: "-mod=readonly",
      CGO_ENABLED: "0",
      GOOS: "linux",
      GOARCH: "arm64",
    });
  });
});
