// llama.cpp from the source that the npm package `node-llama-cpp` ships as a git bundle
// (fetched as a tarball by ./bundle.ts, not installed).
//
// extractLlamaSource(): a checkout of the bundled commit (reused by NativeBuild later).
// buildLlamaHost():     a CPU build for the control host (x86, GGML_NATIVE=OFF, GGML_RPC=ON)
//                       of llama-simple, llama-completion and ggml-rpc-server, cached under
//                       ${SPARKFORM_CACHE_DIR:-~/.cache/sparkform}/llama-host-<commit>/ with
//                       ccache beside it, so a second run is a no-op.
import { spawn, spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { llamaBundleDir } from "./bundle";

export interface LlamaSourceInfo {
  /** Path of node-llama-cpp's git bundle. */
  bundle: string;
  /** Tag named by node-llama-cpp's llama.cpp.info.json (the package's own label). */
  tag: string;
  /** Upstream repository named by info.json. */
  repo: string;
  /** The commit the bundle's HEAD points to (40 hex). */
  commit: string;
}

function git(args: string[], cwd?: string): string {
  const r = spawnSync("git", args, { cwd, encoding: "utf8" });
  if (r.status !== 0) {
    throw new Error(`git ${args.join(" ")} failed (${r.status}): ${r.stderr.trim()}`);
  }
  return r.stdout.trim();
}

let cachedInfo: LlamaSourceInfo | undefined;

/** Where the bundled llama.cpp source is and which commit it holds. */
export function llamaSourceInfo(): LlamaSourceInfo {
  if (cachedInfo) return cachedInfo;
  const dir = llamaBundleDir(sparkformCacheDir());
  const bundle = path.join(dir, "gitRelease.bundle");
  const info = JSON.parse(fs.readFileSync(path.join(dir, "llama.cpp.info.json"), "utf8")) as {
    tag?: string;
    llamaCppGithubRepo?: string;
  };
  const heads = git(["bundle", "list-heads", bundle]).split("\n");
  const head = heads.find((l) => / HEAD$/.test(l)) ?? heads[0];
  const commit = head?.split(" ")[0] ?? "";
  if (!/^[0-9a-f]{40}$/.test(commit)) throw new Error(`cannot read the commit of ${bundle}`);
  cachedInfo = { bundle, tag: info.tag ?? "", repo: info.llamaCppGithubRepo ?? "", commit };
  return cachedInfo;
}

/** The cache root: $SPARKFORM_CACHE_DIR or ~/.cache/sparkform. */
export function sparkformCacheDir(): string {
  return process.env.SPARKFORM_CACHE_DIR || path.join(os.homedir(), ".cache", "sparkform");
}

/**
 * Check out the bundled llama.cpp commit into `dir` (created if missing). An existing
 * checkout of the same commit with a clean tree is reused; anything else in `dir` is an error.
 */
export function extractLlamaSource(dir: string): { dir: string; commit: string; tag: string } {
  const info = llamaSourceInfo();
  if (fs.existsSync(path.join(dir, ".git"))) {
    const head = git(["rev-parse", "HEAD"], dir);
    if (head !== info.commit) {
      throw new Error(`${dir} holds llama.cpp ${head}, expected ${info.commit}`);
    }
    if (git(["status", "--porcelain", "--untracked-files=no"], dir) !== "") {
      throw new Error(`${dir}: the llama.cpp checkout has local changes`);
    }
    return { dir, commit: info.commit, tag: info.tag };
  }
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0) {
    throw new Error(`${dir} exists and is not an empty directory or a llama.cpp checkout`);
  }
  fs.mkdirSync(path.dirname(dir), { recursive: true });
  const tmp = `${dir}.tmp-${process.pid}`;
  fs.rmSync(tmp, { recursive: true, force: true });
  git(["-c", "advice.detachedHead=false", "clone", "--quiet", "--no-checkout", info.bundle, tmp]);
  git(["-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", info.commit], tmp);
  fs.rmSync(dir, { recursive: true, force: true });
  fs.renameSync(tmp, dir);
  return { dir, commit: info.commit, tag: info.tag };
}

export interface LlamaHostBuild {
  commit: string;
  tag: string;
  root: string;
  sourceDir: string;
  buildDir: string;
  bin: { llamaSimple: string; llamaCompletion: string; rpcServer: string };
  /** True when this call compiled; false when the cached build was reused. */
  built: boolean;
  seconds: number;
}

export interface BuildLlamaHostOptions {
  /** Cache root; default sparkformCacheDir(). */
  cacheDir?: string;
  /** Parallel jobs; default the CPU count. */
  jobs?: number;
  /** Receives build output lines (default: discarded, kept in <root>/build.log). */
  onLog?: (line: string) => void;
}

export const LLAMA_HOST_CMAKE_FLAGS = [
  "-DCMAKE_BUILD_TYPE=Release",
  "-DGGML_RPC=ON",
  "-DGGML_NATIVE=OFF",
  "-DLLAMA_CURL=OFF",
  "-DLLAMA_OPENSSL=OFF",
  "-DLLAMA_BUILD_TESTS=OFF",
  "-DGGML_CCACHE=ON",
];
export const LLAMA_HOST_TARGETS = ["llama-simple", "llama-completion", "ggml-rpc-server"];

/**
 * Run a build step: its output goes to `log` (and, line by line, to `onLog`); a failure
 * rejects with the command and the last 4000 characters of its output.
 */
export function runLogged(
  cmd: string,
  args: string[],
  opts: { cwd: string; env?: NodeJS.ProcessEnv; log: fs.WriteStream; onLog?: (l: string) => void },
): Promise<void> {
  return new Promise((resolve, reject) => {
    opts.log.write(`$ ${cmd} ${args.join(" ")}\n`);
    const child = spawn(cmd, args, {
      cwd: opts.cwd,
      env: opts.env,
      stdio: ["ignore", "pipe", "pipe"],
    });
    let tail = "";
    const onData = (b: Buffer) => {
      const s = b.toString("utf8");
      opts.log.write(s);
      tail = (tail + s).slice(-4000);
      if (opts.onLog) for (const l of s.split("\n")) if (l) opts.onLog(l);
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.on("error", reject);
    child.on("close", (code) =>
      code === 0
        ? resolve()
        : reject(new Error(`${cmd} ${args.join(" ")} exited ${code}:\n${tail}`)),
    );
  });
}

/**
 * Build llama-simple, llama-completion and ggml-rpc-server for this host from the bundled
 * source, or reuse the cached build of the same commit and flags.
 */
export async function buildLlamaHost(opts: BuildLlamaHostOptions = {}): Promise<LlamaHostBuild> {
  const started = Date.now();
  const info = llamaSourceInfo();
  const cacheDir = opts.cacheDir ?? sparkformCacheDir();
  const root = path.join(cacheDir, `llama-host-${info.commit}`);
  const sourceDir = path.join(root, "src");
  const buildDir = path.join(root, "build");
  const binDir = path.join(buildDir, "bin");
  const bin = {
    llamaSimple: path.join(binDir, "llama-simple"),
    llamaCompletion: path.join(binDir, "llama-completion"),
    rpcServer: path.join(binDir, "ggml-rpc-server"),
  };
  const stampPath = path.join(root, "build.stamp.json");
  const stamp = JSON.stringify({
    commit: info.commit,
    flags: LLAMA_HOST_CMAKE_FLAGS,
    targets: LLAMA_HOST_TARGETS,
  });
  const result = (built: boolean): LlamaHostBuild => ({
    commit: info.commit,
    tag: info.tag,
    root,
    sourceDir,
    buildDir,
    bin,
    built,
    seconds: (Date.now() - started) / 1000,
  });

  const binsPresent = () => Object.values(bin).every((p) => fs.existsSync(p));
  if (binsPresent() && fs.existsSync(stampPath) && fs.readFileSync(stampPath, "utf8") === stamp) {
    return result(false);
  }

  fs.mkdirSync(root, { recursive: true });
  const release = await acquireLock(path.join(root, ".lock"));
  try {
    // Another process may have finished the build while this one waited for the lock.
    if (binsPresent() && fs.existsSync(stampPath) && fs.readFileSync(stampPath, "utf8") === stamp) {
      return result(false);
    }
    extractLlamaSource(sourceDir);
    fs.rmSync(stampPath, { force: true });
    const env: NodeJS.ProcessEnv = {
      ...process.env,
      CCACHE_DIR: process.env.CCACHE_DIR || path.join(cacheDir, "ccache"),
      CCACHE_BASEDIR: root,
    };
    const log = fs.createWriteStream(path.join(root, "build.log"), { flags: "w" });
    try {
      const jobs = String(opts.jobs ?? os.cpus().length);
      const ctx = { cwd: root, env, log, onLog: opts.onLog };
      await runLogged("cmake", ["-S", sourceDir, "-B", buildDir, ...LLAMA_HOST_CMAKE_FLAGS], ctx);
      await runLogged(
        "cmake",
        ["--build", buildDir, "--target", ...LLAMA_HOST_TARGETS, "-j", jobs],
        ctx,
      );
    } finally {
      await new Promise<void>((r) => log.end(r));
    }
    if (!binsPresent())
      throw new Error(`llama.cpp build finished but binaries are missing in ${binDir}`);
    fs.writeFileSync(stampPath, stamp);
    return result(true);
  } finally {
    release();
  }
}

/** A directory lock holding the owner's pid; a lock whose owner is gone is taken over. */
async function acquireLock(lockDir: string, timeoutMs = 30 * 60_000): Promise<() => void> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    try {
      fs.mkdirSync(lockDir);
      fs.writeFileSync(path.join(lockDir, "pid"), String(process.pid));
      return () => fs.rmSync(lockDir, { recursive: true, force: true });
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code !== "EEXIST") throw e;
    }
    let owner = NaN;
    try {
      owner = Number(fs.readFileSync(path.join(lockDir, "pid"), "utf8"));
    } catch {
      // being created or removed right now
    }
    let alive = true;
    if (Number.isInteger(owner) && owner > 0) {
      try {
        process.kill(owner, 0);
      } catch (e) {
        alive = (e as NodeJS.ErrnoException).code === "EPERM";
      }
    }
    if (!alive) {
      fs.rmSync(lockDir, { recursive: true, force: true });
      continue;
    }
    if (Date.now() > deadline) throw new Error(`timed out waiting for the build lock ${lockDir}`);
    await new Promise((r) => setTimeout(r, 1000));
  }
}

if (require.main === module) {
  buildLlamaHost({ onLog: (l) => process.stderr.write(l + "\n") }).then(
    (b) => console.log(JSON.stringify(b, null, 2)),
    (e: unknown) => {
      console.error(e instanceof Error ? e.message : e);
      process.exit(1);
    },
  );
}
