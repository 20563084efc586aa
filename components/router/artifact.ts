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
//           temporary name in the cache directory, renamed into place when complete
import { spawn, spawnSync } from "node:child_process";
import { createHash, randomBytes } from "node:crypto";
import { createReadStream, existsSync, mkdirSync, readFileSync, renameSync, rmSync } from "node:fs";
import * as os from "node:os";
import * as path from "node:path";

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
  /** `go env GOVERSION`, e.g. go1.26.8. */
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
  for (const cand of ["go", "/usr/local/go/bin/go"]) {
    const r = spawnSync(cand, ["env", "GOVERSION"], { encoding: "utf8" });
    if (r.status === 0 && r.stdout.trim()) return cand;
  }
  return undefined;
}

function goVersion(go: string): string {
  const r = spawnSync(go, ["env", "GOVERSION"], { encoding: "utf8" });
  return r.stdout.trim();
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
  const go = goCommand();
  const version = caddyVersion(files.goMod);
  return {
    version,
    arch: a,
    key: artifactKey({ ...files, version, goVersion: go ? goVersion(go) : "none", arch: a }),
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
  const key = artifactKey({ ...files, version, goVersion: goVersion(go), arch });
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
      env: {
        ...process.env,
        CGO_ENABLED: "0",
        GOOS: "linux",
        GOARCH: arch,
        // The pin is go.mod and go.sum as committed: a missing entry fails the build rather than
        // editing them.
        GOFLAGS: "-mod=readonly",
      },
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
