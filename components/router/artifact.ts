// The router's binary: Caddy built on the control node from its Go modules (setup/router/, the
// pin in go.mod and go.sum), for the node's architecture, into the project's cache. The Sparks
// have no root and no package installs, so the router arrives as a verified file, as the Pulumi
// CLI is built here from its Go modules (setup/setup.sh).
//
//   cache   ${SPARKFORM_CACHE_DIR:-~/.cache/sparkform}/router/caddy-<version>-linux-<arch>-<key>/caddy
//   key     sha256 of the Caddy version, go.mod, go.sum, main.go, the Go version and the target
//           (GOOS/GOARCH, CGO off), first 16 hex digits: a new pin, a new Go or another arch is
//           a new directory, never an overwrite
//   build   CGO_ENABLED=0 GOOS=linux GOARCH=<arch> go build -trimpath -buildvcs=false, into a
//           temporary name in the cache directory, renamed into place when complete, with
//           childEnv() and Go's own variables only (GO_ENV_NAMES): the program and provider
//           hold PULUMI_CONFIG, the stack's secrets decrypted, which `go` never sees
//   go      read, not run: the Go install's VERSION file and go.mod's go/toolchain line (the
//           program computes the key at every preview, and starts no toolchain for it)
import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import {
  accessSync,
  constants,
  createReadStream,
  existsSync,
  mkdirSync,
  readFileSync,
  realpathSync,
  renameSync,
  rmSync,
  statSync,
} from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { childEnv } from "../transport";

/** The Go module of the router (go.mod, go.sum, main.go). */
export const ROUTER_MODULE_DIR = path.join(__dirname, "..", "..", "setup", "router");
export const CADDY_MODULE = "github.com/caddyserver/caddy/v2";

export type GoArch = "amd64" | "arm64";

export interface RouterArtifact {
  /** The binary on the control node. */
  readonly path: string;
  readonly sha256: string;
  /** Caddy's module version, e.g. v2.11.9. */
  readonly version: string;
  readonly arch: GoArch;
  /** The cache key (16 hex digits). */
  readonly key: string;
}

/** A node's `uname -m` (the fact sheet's arch) as Go names it. */
export function goArch(unameM: string): GoArch {
  switch (unameM.trim()) {
    case "x86_64":
    case "amd64":
      return "amd64";
    case "aarch64":
    case "arm64":
      return "arm64";
    default:
      throw new Error(
        `router: no Caddy build for architecture ${JSON.stringify(unameM)} (uname -m): ` +
          "sparkform builds the router for x86_64 (amd64) and aarch64 (arm64) nodes",
      );
  }
}

/** ${SPARKFORM_CACHE_DIR:-~/.cache/sparkform}: the control node's cache, as setup.sh names it. */
export function cacheRoot(): string {
  return process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir(), ".cache", "sparkform");
}

/** The Caddy version go.mod requires (the pin). */
export function caddyVersion(goMod: string): string {
  const m = goMod.match(/^\s*(?:require\s+)?github\.com\/caddyserver\/caddy\/v2\s+(v\S+)/m);
  if (!m?.[1]) throw new Error(`router: go.mod does not require ${CADDY_MODULE}`);
  return m[1];
}

export interface KeyParts {
  readonly version: string;
  readonly goMod: string;
  readonly goSum: string;
  readonly mainGo: string;
  /** The Go that builds it (toolchainVersion), e.g. go1.26.8. */
  readonly goVersion: string;
  readonly arch: GoArch;
}

/** The cache key: everything that goes into the binary, hashed (16 hex digits). */
export function artifactKey(p: KeyParts): string {
  const h = createHash("sha256");
  for (const part of [
    `caddy ${p.version}`,
    `go.mod ${sha(p.goMod)}`,
    `go.sum ${sha(p.goSum)}`,
    `main.go ${sha(p.mainGo)}`,
    `go ${p.goVersion}`,
    `target linux/${p.arch} cgo=0 -trimpath -buildvcs=false`,
  ])
    h.update(`${part}\n`);
  return h.digest("hex").slice(0, 16);
}

/** Where the binary of `key` lives in the cache. */
export function artifactPath(root: string, version: string, arch: GoArch, key: string): string {
  return path.join(root, "router", `caddy-${version}-linux-${arch}-${key}`, "caddy");
}

const sha = (text: string) => createHash("sha256").update(text).digest("hex");

/** The `go` command: on PATH, else Go's usual install directory (setup.sh adds it too). */
export function goCommand(): string | undefined {
  const dirs = (process.env.PATH ?? "").split(path.delimiter).filter((d) => d !== "");
  for (const cand of [...dirs.map((d) => path.join(d, "go")), "/usr/local/go/bin/go"]) {
    try {
      accessSync(cand, constants.X_OK);
      if (statSync(cand).isFile()) return cand;
    } catch {
      // not here
    }
  }
  return undefined;
}

/**
 * Go's own settings a build needs, passed to `go` by name (transport/child-env.ts): where its
 * caches and modules are, how it reaches the module proxy, which toolchain. Never the whole
 * environment: the program and the provider hold PULUMI_CONFIG, the stack's secrets decrypted.
 */
export const GO_ENV_NAMES = [
  "GOPATH",
  "GOMODCACHE",
  "GOCACHE",
  "GOPROXY",
  "GONOPROXY",
  "GOPRIVATE",
  "GONOSUMDB",
  "GONOSUMCHECK",
  "GOSUMDB",
  "GOINSECURE",
  "GOTOOLCHAIN",
  "GOENV",
  "GOROOT",
  "XDG_CACHE_HOME",
  "XDG_CONFIG_HOME",
  "HTTP_PROXY",
  "HTTPS_PROXY",
  "NO_PROXY",
  "http_proxy",
  "https_proxy",
  "no_proxy",
  "SSL_CERT_FILE",
  "SSL_CERT_DIR",
] as const;

/**
 * The environment of `go build` for `arch`: childEnv() and GO_ENV_NAMES from `from`; GOFLAGS
 * kept but for its -mod=, then -mod=readonly (the pin is go.mod and go.sum as committed: a
 * missing entry fails the build rather than editing them); no cgo, linux/<arch>.
 */
export function goBuildEnv(
  arch: GoArch,
  from: NodeJS.ProcessEnv = process.env,
): Record<string, string> {
  const flags = (from.GOFLAGS ?? "")
    .split(/\s+/)
    .filter((f) => f !== "" && !/^--?mod(=|$)/.test(f));
  return childEnv(
    {
      pass: GO_ENV_NAMES,
      set: {
        GOFLAGS: [...flags, "-mod=readonly"].join(" "),
        CGO_ENABLED: "0",
        GOOS: "linux",
        GOARCH: arch,
      },
    },
    from,
  );
}

const GO_VERSION = /^go(\d+)\.(\d+)(?:\.(\d+))?$/;

function versionParts(v: string): [number, number, number] | undefined {
  const m = GO_VERSION.exec(v);
  return m ? [Number(m[1]), Number(m[2]), Number(m[3] ?? 0)] : undefined;
}

/** The higher of two Go versions (`go1.26.8`); one that is not a release loses. */
export function higherGo(a: string, b: string): string {
  const x = versionParts(a);
  const y = versionParts(b);
  if (!x) return b;
  if (!y) return a;
  for (let i = 0; i < 3; i++) {
    if ((x[i] as number) !== (y[i] as number)) return (x[i] as number) > (y[i] as number) ? a : b;
  }
  return a;
}

/** go.mod's `toolchain` line, else its `go` line, as a toolchain name (`go 1.26.0` → go1.26.0). */
export function goModToolchain(goMod: string): string | undefined {
  const tc = /^\s*toolchain\s+(go\S+)\s*$/m.exec(goMod)?.[1];
  if (tc) return tc;
  const go = /^\s*go\s+(\d+\.\d+(?:\.\d+)?)\s*$/m.exec(goMod)?.[1];
  return go ? `go${go}` : undefined;
}

/**
 * The version of the Go install `go` runs from, without starting it: the first line of its
 * GOROOT/VERSION (`go1.26.8`). Only where that file is missing or not a release is `go env
 * GOVERSION` asked, with the build's environment (no secret of the stack reaches it).
 */
export function installedGoVersion(go: string): string {
  try {
    const root = path.dirname(path.dirname(realpathSync(go)));
    const first = readFileSync(path.join(root, "VERSION"), "utf8").split("\n")[0]?.trim() ?? "";
    if (GO_VERSION.test(first)) return first;
  } catch {
    // no VERSION file: ask go itself
  }
  const r = spawnSync(go, ["env", "GOVERSION"], {
    encoding: "utf8",
    env: childEnv({ pass: GO_ENV_NAMES }),
  });
  return r.status === 0 ? r.stdout.trim() : "";
}

/**
 * The Go version that builds the router, read without a build: GOTOOLCHAIN when it names one
 * exact toolchain, else the higher of the installed Go and go.mod's toolchain/go line (what
 * GOTOOLCHAIN=auto builds with). "none" without Go.
 */
export function toolchainVersion(
  go: string | undefined = goCommand(),
  goMod: string = moduleFiles().goMod,
): string {
  const pinned = process.env.GOTOOLCHAIN;
  if (pinned && GO_VERSION.test(pinned)) return pinned;
  if (!go) return "none";
  const installed = installedGoVersion(go);
  const wanted = goModToolchain(goMod);
  return wanted ? higherGo(installed, wanted) : installed;
}

function moduleFiles(): { goMod: string; goSum: string; mainGo: string } {
  const read = (f: string) => readFileSync(path.join(ROUTER_MODULE_DIR, f), "utf8");
  return { goMod: read("go.mod"), goSum: read("go.sum"), mainGo: read("main.go") };
}

/**
 * What identifies the artifact without building it: the version and the cache key. Cheap (no
 * build), so a resource can take it as an input and `preview` shows a new pin as a restart.
 * Without Go the Go version reads "none"; the build then says what to install.
 */
export function routerArtifactId(arch: string): { version: string; key: string; arch: GoArch } {
  const a = goArch(arch);
  const files = moduleFiles();
  const version = caddyVersion(files.goMod);
  return {
    version,
    arch: a,
    key: artifactKey({
      ...files,
      version,
      goVersion: toolchainVersion(goCommand(), files.goMod),
      arch: a,
    }),
  };
}

export async function fileSha256(file: string): Promise<string> {
  const h = createHash("sha256");
  for await (const chunk of createReadStream(file)) h.update(chunk as Buffer);
  return h.digest("hex");
}

export interface BuildOptions {
  /** `uname -m` of the node (or a Go arch name). */
  readonly arch: string;
  /** Progress lines (what it does, how long it took). */
  readonly progress?: (line: string) => void | Promise<void>;
  /** Default 30 minutes (a cold build takes a few on 2 cores). */
  readonly timeoutMs?: number;
}

const memo = new Map<string, Promise<RouterArtifact>>();

/**
 * The router binary for `arch`: from the cache when its key is there, else built and placed
 * there. Memoized per process and key; a failed build is forgotten (the next call tries again).
 */
export function routerBinary(opts: BuildOptions): Promise<RouterArtifact> {
  const arch = goArch(opts.arch);
  const go = goCommand();
  if (!go)
    return Promise.reject(
      new Error(
        "router: `go` is not on PATH (nor /usr/local/go/bin/go): the router (Caddy) is built on " +
          "the control node from its Go modules (setup/router/). Install Go >= 1.21 " +
          "(https://go.dev/dl/, or `apt-get install golang-go`) and run `npm run setup`, which builds it",
      ),
    );
  const files = moduleFiles();
  const version = caddyVersion(files.goMod);
  const key = artifactKey({
    ...files,
    version,
    goVersion: toolchainVersion(go, files.goMod),
    arch,
  });
  const id = `${key}:${arch}`;
  let p = memo.get(id);
  if (!p) {
    p = obtain(go, version, arch, key, opts).catch((err: unknown) => {
      memo.delete(id);
      throw err;
    });
    memo.set(id, p);
  }
  return p;
}

async function obtain(
  go: string,
  version: string,
  arch: GoArch,
  key: string,
  opts: BuildOptions,
): Promise<RouterArtifact> {
  const say = async (line: string) => {
    await opts.progress?.(line);
  };
  const file = artifactPath(cacheRoot(), version, arch, key);
  if (existsSync(file)) {
    const sha256 = await fileSha256(file);
    await say(`router: caddy ${version} linux/${arch} from the cache (${file})`);
    return { path: file, sha256, version, arch, key };
  }
  const dir = path.dirname(file);
  mkdirSync(dir, { recursive: true });
  const tmp = path.join(dir, `.caddy.tmp-${process.pid}-${randomBytes(4).toString("hex")}`);
  const start = Date.now();
  await say(
    `router: building caddy ${version} for linux/${arch} from ${CADDY_MODULE} (setup/router; a cold build takes minutes, then it is cached)`,
  );
  try {
    await goBuild(go, arch, tmp, opts.timeoutMs ?? 30 * 60_000);
    renameSync(tmp, file);
  } finally {
    rmSync(tmp, { force: true });
  }
  const sha256 = await fileSha256(file);
  await say(
    `router: built caddy ${version} linux/${arch} in ${((Date.now() - start) / 1000).toFixed(0)} s (sha256 ${sha256.slice(0, 16)}) → ${file}`,
  );
  return { path: file, sha256, version, arch, key };
}

function goBuild(go: string, arch: GoArch, out: string, timeoutMs: number): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(go, ["build", "-trimpath", "-buildvcs=false", "-o", out, "."], {
      cwd: ROUTER_MODULE_DIR,
      // childEnv() and Go's own settings: never PULUMI_CONFIG (the stack's secrets decrypted).
      env: goBuildEnv(arch),
      stdio: ["ignore", "pipe", "pipe"],
    });
    let tail = "";
    const keep = (b: Buffer) => {
      tail = (tail + b.toString("utf8")).slice(-4000);
    };
    child.stdout.on("data", keep);
    child.stderr.on("data", keep);
    const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs);
    child.on("error", (err) => {
      clearTimeout(timer);
      reject(new Error(`router: could not run ${go} build: ${err.message}`, { cause: err }));
    });
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      if (code === 0) return resolve();
      reject(
        new Error(
          `router: go build of caddy for linux/${arch} failed (${signal ? `killed by ${signal}${signal === "SIGTERM" ? ` after ${timeoutMs / 1000} s` : ""}` : `exit ${code}`}) in ${ROUTER_MODULE_DIR}:\n${tail.trim()}\n` +
            "The module proxy (GOPROXY) must be reachable for a first build, or the modules in Go's module cache.",
        ),
      );
    });
  });
}
