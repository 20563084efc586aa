// The router's artifact (components/router/artifact.ts): arch mapping, cache key and path, the
// pin read from go.mod; and the provider's pure parts (drift, what a change restarts).
import { createHash } from "node:crypto";
import { readFileSync } from "node:fs";
import * as path from "node:path";
import { describe, expect, it } from "vitest";
import {
  artifactKey,
  artifactPath,
  caddyVersion,
  goArch,
  ROUTER_MODULE_DIR,
} from "../../components/router/artifact";
import {
  binaryName,
  configText,
  routerChanges,
  routerDrift,
  type RouterOutputs,
  type RouterStatus,
} from "../../components/router/provider";

describe("goArch", () => {
  it("maps uname -m to Go's names", () => {
    expect(goArch("x86_64")).toBe("amd64");
    expect(goArch("aarch64")).toBe("arm64");
    expect(goArch("aarch64\n")).toBe("arm64");
    expect(goArch("arm64")).toBe("arm64");
  });
  it("refuses what it cannot build", () => {
    expect(() => goArch("armv7l")).toThrow(/x86_64 \(amd64\) and aarch64 \(arm64\)/);
    expect(() => goArch("")).toThrow(/architecture/);
  });
});

describe("the pin", () => {
  it("is Caddy v2.11.9 in setup/router/go.mod, with its go.sum lines", () => {
    const goMod = readFileSync(path.join(ROUTER_MODULE_DIR, "go.mod"), "utf8");
    expect(caddyVersion(goMod)).toBe("v2.11.9");
    const goSum = readFileSync(path.join(ROUTER_MODULE_DIR, "go.sum"), "utf8");
    expect(goSum).toMatch(/^github\.com\/caddyserver\/caddy\/v2 v2\.11\.9 h1:/m);
  });
  it("reads a require block and a one-line require", () => {
    expect(caddyVersion("module x\nrequire github.com/caddyserver/caddy/v2 v2.1.0\n")).toBe(
      "v2.1.0",
    );
    expect(caddyVersion("require (\n\tgithub.com/caddyserver/caddy/v2 v2.3.4\n)\n")).toBe("v2.3.4");
    expect(() => caddyVersion("module x\n")).toThrow(/does not require/);
  });
});

describe("artifactKey", () => {
  const base = {
    version: "v2.11.9",
    goMod: "mod",
    goSum: "sum",
    mainGo: "main",
    goVersion: "go1.26.8",
    arch: "arm64" as const,
  };
  it("is 16 hex digits, stable", () => {
    expect(artifactKey(base)).toMatch(/^[0-9a-f]{16}$/);
    expect(artifactKey(base)).toBe(artifactKey({ ...base }));
  });
  it.each([
    ["version", { version: "v2.11.10" }],
    ["go.mod", { goMod: "mod2" }],
    ["go.sum", { goSum: "sum2" }],
    ["main.go", { mainGo: "main2" }],
    ["Go version", { goVersion: "go1.26.9" }],
    ["arch", { arch: "amd64" as const }],
  ])("changes with the %s", (_what, change) => {
    expect(artifactKey({ ...base, ...change })).not.toBe(artifactKey(base));
  });
  it("names a directory per version, arch and key in the cache", () => {
    expect(artifactPath("/c", "v2.11.9", "arm64", "0123456789abcdef")).toBe(
      "/c/router/caddy-v2.11.9-linux-arm64-0123456789abcdef/caddy",
    );
  });
});

describe("the Router provider's pure parts", () => {
  const sha = "a".repeat(64);
  const inputs = {
    kind: "Router" as const,
    providerVersion: "1",
    target: { name: "spark-1", host: "10.0.0.1", user: "spark", port: 22 } as never,
    node: "spark-1",
    bind: "127.0.0.1",
    port: 8000,
    arch: "aarch64",
    artifact: { version: "v2.11.9", key: "0123456789abcdef", arch: "arm64" as const },
    upstreams: [
      { node: "spark-1", url: "http://10.0.0.1:8080" },
      { node: "spark-2", url: "http://10.0.0.2:8080" },
    ],
    topology: "replicas",
    unavailable: "down",
    healthIntervalSeconds: 1,
    healthTimeoutSeconds: 60,
    programs: {} as never,
  };
  const status: RouterStatus = {
    unit: {
      ActiveState: "active",
      SubState: "running",
      Result: "success",
      NRestarts: "0",
      InvocationID: "abc",
    },
    runningDigest: sha,
    binaryDigest: sha,
    listening: ["127.0.0.1"],
    configDigest: "c".repeat(64),
  };
  const started = { invocationId: "abc", nRestarts: "0" };
  const drift = (s: Partial<RouterStatus>) =>
    routerDrift({
      status: { ...status, ...s },
      started,
      binaryDigest: sha,
      configDigest: "c".repeat(64),
      bind: "127.0.0.1",
      port: 8000,
    });

  it("names the binary by its digest", () => {
    expect(binaryName(sha)).toBe("caddy-aaaaaaaaaaaaaaaa");
  });
  it("sees no drift in the router it started", () => {
    expect(drift({})).toEqual([]);
  });
  it("sees a stopped or restarted unit, another binary, no listener, a changed config", () => {
    expect(
      drift({ unit: { ...status.unit, ActiveState: "failed", SubState: "failed" } })[0],
    ).toMatch(/router unit is failed\/failed/);
    expect(drift({ unit: { ...status.unit, NRestarts: "1" } }).join()).toMatch(/restarted 1 times/);
    expect(drift({ runningDigest: "b".repeat(64) }).join()).toMatch(/running caddy sha256 bbbb/);
    expect(drift({ binaryDigest: "" }).join()).toMatch(/caddy sha256 \(missing\)/);
    expect(drift({ listening: [] }).join()).toMatch(/nothing listens on 127\.0\.0\.1:8000/);
    expect(drift({ listening: ["0.0.0.0"] }).join()).toMatch(/listening on 0\.0\.0\.0 besides/);
    expect(drift({ configDigest: "" }).join()).toMatch(/router-8000\.json sha256 \(missing\)/);
  });
  it("sees a server a roll left out of rotation (the drain file), and says what puts it back", () => {
    expect(drift({ drained: [] })).toEqual([]);
    expect(drift({ drained: ["10.0.0.2:8080"] })).toEqual([
      "~/.cache/sparkform/router/router-8000.drain keeps 10.0.0.2:8080 out of rotation: a roll of the replicas did not finish; `pulumi up --refresh` puts it back",
    ]);
  });

  const olds = (): RouterOutputs => ({
    ...inputs,
    url: "http://127.0.0.1:8000",
    unit: "sparkform-router-8000",
    binary: "~/.cache/sparkform/router/caddy-aaaaaaaaaaaaaaaa",
    binaryDigest: sha,
    configDigest: createHash("sha256").update(configText(inputs)).digest("hex"),
    status,
    started,
    drift: [],
  });
  it("restarts for upstreams, port, bind, a new artifact, the 503 text, drift", () => {
    expect(routerChanges(olds(), inputs)).toEqual({ restart: [], record: [] });
    const up = routerChanges(olds(), { ...inputs, upstreams: inputs.upstreams.slice(0, 1) });
    expect(up.restart).toEqual(["upstreams", "config"]);
    expect(routerChanges(olds(), { ...inputs, port: 8001 }).restart).toContain("port");
    expect(
      routerChanges(olds(), { ...inputs, artifact: { ...inputs.artifact, key: "f".repeat(16) } })
        .restart,
    ).toEqual(["artifact"]);
    expect(routerChanges(olds(), { ...inputs, unavailable: "gone" }).restart).toEqual([
      "unavailable",
      "config",
    ]);
    expect(routerChanges({ ...olds(), drift: ["x"] }, inputs).restart).toEqual(["drift"]);
  });
  it("only records the topology and the health timeout", () => {
    expect(
      routerChanges(olds(), { ...inputs, topology: "single", healthTimeoutSeconds: 5 }),
    ).toEqual({
      restart: [],
      record: ["topology", "healthTimeoutSeconds"],
    });
  });
});

describe("the router's unit (native/unit/start.sh's arguments)", () => {
  it("runs the checked binary with `run --config`, no guard, Caddy's dirs its own, up = /health", async () => {
    const { startCommand } = await import("../../components/router/provider");
    const { programRef } = await import("../../components/native-script");
    const programs = {
      start: programRef("unit/start.sh"),
      stop: programRef("unit/stop.sh"),
      status: programRef("unit/status.py"),
      files: programRef("router/files.sh"),
    };
    const s = startCommand(
      { bind: "127.0.0.1", port: 8000, programs, healthTimeoutSeconds: 60 },
      "~/.cache/sparkform/router/caddy-0123456789abcdef",
      "d".repeat(64),
    );
    const args = [...(s.args ?? [])];
    const opt = (o: string) => args[args.indexOf(o) + 1];
    expect(opt("--unit")).toBe("sparkform-router-8000");
    expect(opt("--bin")).toBe(".cache/sparkform/router/caddy-0123456789abcdef");
    expect(opt("--sha")).toBe("d".repeat(64));
    expect(opt("--guard-percent")).toBe("0");
    expect(opt("--guard-text")).toBe("");
    expect(opt("--health")).toBe("60");
    expect(opt("--state")).toBe("~/.cache/sparkform/router");
    expect(args.filter((a, i) => args[i - 1] === "--env")).toEqual([
      "XDG_DATA_HOME=~/.cache/sparkform/router/data-8000",
      "XDG_CONFIG_HOME=~/.cache/sparkform/router/data-8000",
    ]);
    expect(args.slice(args.indexOf("--") + 1)).toEqual([
      "run",
      "--config",
      "~/.cache/sparkform/router/router-8000.json",
    ]);
  });
});
