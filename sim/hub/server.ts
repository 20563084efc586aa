// A Hugging Face Hub-compatible HTTP endpoint for tests (HF_ENDPOINT-style base URL).
//
// Serves the repo tree laid out by repo.ts with the routes the hub clients use:
//   GET  /api/models/{repo}[/revision/{rev}]        model info: sha, siblings (rfilename, size, lfs)
//   GET  /api/models/{repo}/tree/{rev}[/{path}]     listFiles: [{type, oid, size, path, lfs?}]
//   POST /api/models/{repo}/paths-info/{rev}        pathsInfo
//   HEAD|GET /{repo}/resolve/{rev}/{file}           the file, with Range, ETag, X-Repo-Commit,
//                                                   X-Linked-Etag / X-Linked-Size (LFS files)
// plus test controls on the same listener:
//   GET|POST|DELETE /_admin/faults                  read / set / clear injected faults
//   GET|DELETE /_admin/log                          the request log (JSON) / clear it
// A bearer token, when configured, is required on every non-admin route (401 otherwise).
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as http from "node:http";
import * as https from "node:https";
import * as net from "node:net";
import type { AddressInfo } from "node:net";
import type { TLSSocket } from "node:tls";
import * as path from "node:path";
import { z } from "zod";
import { COMMITS_DIR, REFS_FILE, isLfsPath, isValidRepoId, repoDir } from "./repo";

export const HfFaultsSchema = z
  .object({
    /** Close the connection after this many body bytes of a file download (only responses longer than that). */
    cutAfterBytes: z.number().int().nonnegative().nullable().optional(),
    /** "once" (default): cut the next such download, then the fault clears itself; "always": every one. */
    cutMode: z.enum(["once", "always"]).optional(),
    /** Answer file downloads with 200 and the whole body, whatever Range asks for. */
    ignoreRange: z.boolean().optional(),
    /** Serve wrong bytes: flip (xor 0xff) one byte of the file content. */
    wrongBytes: z.boolean().optional(),
    /** Absolute file offset of the flipped byte; default the middle of the file. */
    wrongBytesOffset: z.number().int().nonnegative().optional(),
    /** Throttle file bodies to this many bytes per second. */
    throttleBytesPerSec: z.number().positive().nullable().optional(),
    /** Apply the faults only to files whose path ends with this. */
    pathSuffix: z.string().optional(),
    /**
     * Answer file downloads with a 302 to this URL (the file's path and query appended), e.g.
     * the endpoint's own http:// URL (an https→http downgrade) or another origin.
     */
    redirectTo: z.string().optional(),
    /** Send this as the Content-Length of file downloads, whatever the body is (e.g. "12abc"). */
    contentLength: z.string().optional(),
  })
  .strict();
export type HfFaults = z.infer<typeof HfFaultsSchema>;

export interface HfLogEntry {
  time: string;
  method: string;
  /** Path and query; never contains credentials. */
  path: string;
  /** The Range request header, if any. */
  range: string | null;
  status: number;
  /** Body bytes written to the socket. */
  bytes: number;
  /** Whether an Authorization header was present (its value is never logged). */
  auth: boolean;
  remote: string | null;
  ms: number;
  /** Faults applied to this response. */
  faults?: string[];
  /** False when the connection ended before the whole body was sent. */
  complete: boolean;
  /** The request came over TLS (only an endpoint started with `tls` serves any). */
  tls: boolean;
}

export interface HfEndpointOptions {
  /** Directory laid out by publishRepo(). */
  root: string;
  /** Bind address (default 127.0.0.1). */
  host?: string;
  /** Port (default 0: ephemeral). */
  port?: number;
  /** When set, non-admin requests need `Authorization: Bearer <token>`. */
  token?: string;
  faults?: HfFaults;
  /** Append the request log as JSON lines to this file. */
  logFile?: string;
  /** Disable the /_admin routes (faults then only via setFaults()). */
  admin?: boolean;
  /**
   * Serve TLS with this key and certificate (PEM) too: one port answers both https and plain
   * http (told apart by the first byte), so a redirect from https to http on the same host and
   * port can be shown, and the log says which requests came in clear (`tls`).
   */
  tls?: { key: string; cert: string };
}

export interface HfEndpoint {
  /** Base URL, e.g. http://127.0.0.1:41234 (use as hubUrl / HF_ENDPOINT). */
  url: string;
  /** With `tls`: the https:// base URL of the same port. */
  httpsUrl?: string;
  host: string;
  port: number;
  close(): Promise<void>;
  setFaults(faults: HfFaults): void;
  getFaults(): HfFaults;
  log(): HfLogEntry[];
  clearLog(): void;
}

interface FileMeta {
  size: number;
  sha256: string;
  /** git blob sha1 of the content (non-LFS) or of the LFS pointer (LFS). */
  oid: string;
  lfs: boolean;
  pointerSize: number;
  mtimeMs: number;
}

const HEX40 = /^[0-9a-f]{40}$/;

class HttpError extends Error {
  constructor(
    readonly status: number,
    message: string,
    readonly code?: string,
  ) {
    super(message);
  }
}

function gitBlobSha1(content: Buffer): string {
  return createHash("sha1").update(`blob ${content.length}\0`).update(content).digest("hex");
}

function lfsPointer(sha256: string, size: number): Buffer {
  return Buffer.from(
    `version https://git-lfs.github.com/spec/v1\noid sha256:${sha256}\nsize ${size}\n`,
  );
}

/** Parse a single `bytes=` range against `size`. null: no usable range (serve 200); "unsatisfiable": 416. */
export function parseRange(
  header: string | undefined,
  size: number,
): { start: number; end: number } | null | "unsatisfiable" {
  if (!header) return null;
  const m = /^\s*bytes\s*=\s*(\d*)\s*-\s*(\d*)\s*$/.exec(header);
  if (!m) return null; // multi-range or another unit: ignore, as RFC 9110 allows
  const [, a, b] = m;
  if (a === "" && b === "") return null;
  if (a === "") {
    const n = Number(b);
    if (n === 0 || size === 0) return "unsatisfiable";
    return { start: Math.max(0, size - n), end: size - 1 };
  }
  const start = Number(a);
  let end = b === "" ? size - 1 : Number(b);
  if (b !== "" && end < start) return null;
  if (start >= size) return "unsatisfiable";
  end = Math.min(end, size - 1);
  return { start, end };
}

/** The first of `drain` and `close`, the other listener removed (one left per wait adds up). */
function drainOrClose(res: http.ServerResponse): Promise<void> {
  return new Promise((resolve) => {
    const done = () => {
      res.off("drain", done).off("close", done);
      resolve();
    };
    res.once("drain", done).once("close", done);
  });
}

export async function startHfEndpoint(opts: HfEndpointOptions): Promise<HfEndpoint> {
  const root = path.resolve(opts.root);
  const host = opts.host ?? "127.0.0.1";
  const adminEnabled = opts.admin ?? true;
  let faults: HfFaults = HfFaultsSchema.parse(opts.faults ?? {});
  const entries: HfLogEntry[] = [];
  const logStream = opts.logFile ? fs.createWriteStream(opts.logFile, { flags: "a" }) : undefined;
  const metaCache = new Map<string, FileMeta>();

  async function fileMeta(abs: string, repoPath: string): Promise<FileMeta> {
    const st = await fs.promises.stat(abs);
    const cached = metaCache.get(abs);
    if (cached && cached.size === st.size && cached.mtimeMs === st.mtimeMs) return cached;
    const content = await fs.promises.readFile(abs);
    const sha256 = createHash("sha256").update(content).digest("hex");
    const lfs = isLfsPath(repoPath, st.size);
    const pointer = lfsPointer(sha256, st.size);
    const meta: FileMeta = {
      size: st.size,
      sha256,
      oid: lfs ? gitBlobSha1(pointer) : gitBlobSha1(content),
      lfs,
      pointerSize: pointer.length,
      mtimeMs: st.mtimeMs,
    };
    metaCache.set(abs, meta);
    return meta;
  }

  function readRefs(repo: string): Record<string, string> {
    const dir = repoDir(root, repo);
    const refsPath = path.join(dir, REFS_FILE);
    if (!fs.existsSync(refsPath)) throw new HttpError(404, "Repository not found", "RepoNotFound");
    return JSON.parse(fs.readFileSync(refsPath, "utf8")) as Record<string, string>;
  }

  /** Branch → commit; a known commit → itself; HEAD → main. */
  function resolveRevision(repo: string, rev: string): { commit: string; dir: string } {
    const refs = readRefs(repo);
    const commitsDir = path.join(repoDir(root, repo), COMMITS_DIR);
    let commit = refs[rev === "HEAD" ? "main" : rev];
    if (!commit && HEX40.test(rev) && fs.existsSync(path.join(commitsDir, rev))) commit = rev;
    if (!commit) throw new HttpError(404, `Invalid rev id: ${rev}`, "RevisionNotFound");
    return { commit, dir: path.join(commitsDir, commit) };
  }

  function resolveInCommit(commitDir: string, repoPath: string): string {
    const parts = repoPath.split("/").filter((x) => x !== "");
    if (parts.some((x) => x === "." || x === "..")) throw new HttpError(400, "invalid path");
    const abs = path.join(commitDir, ...parts);
    if (abs !== commitDir && !abs.startsWith(commitDir + path.sep))
      throw new HttpError(400, "invalid path");
    return abs;
  }

  async function listTree(commitDir: string, sub: string, recursive: boolean) {
    const out: Array<Record<string, unknown>> = [];
    const walk = async (rel: string) => {
      const abs = resolveInCommit(commitDir, rel);
      const dirents = await fs.promises.readdir(abs, { withFileTypes: true });
      dirents.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
      for (const d of dirents) {
        const p = rel ? `${rel}/${d.name}` : d.name;
        if (d.isDirectory()) {
          out.push({
            type: "directory",
            oid: createHash("sha1").update(`tree ${p}`).digest("hex"),
            size: 0,
            path: p,
          });
          if (recursive) await walk(p);
        } else if (d.isFile()) {
          out.push(await treeEntry(commitDir, p));
        }
      }
    };
    const abs = resolveInCommit(commitDir, sub);
    const st = await fs.promises.stat(abs).catch(() => null);
    if (!st) throw new HttpError(404, `Entry not found: ${sub}`, "EntryNotFound");
    if (st.isFile()) out.push(await treeEntry(commitDir, sub));
    else await walk(sub);
    return out;
  }

  async function treeEntry(commitDir: string, p: string): Promise<Record<string, unknown>> {
    const m = await fileMeta(resolveInCommit(commitDir, p), p);
    return {
      type: "file",
      oid: m.oid,
      size: m.size,
      path: p,
      ...(m.lfs ? { lfs: { oid: m.sha256, size: m.size, pointerSize: m.pointerSize } } : {}),
    };
  }

  function sendJson(
    res: http.ServerResponse,
    status: number,
    body: unknown,
    headers: Record<string, string> = {},
  ) {
    const text = JSON.stringify(body);
    res.writeHead(status, {
      "Content-Type": "application/json; charset=utf-8",
      "Content-Length": Buffer.byteLength(text),
      ...headers,
    });
    res.end(text);
  }

  async function readBody(req: http.IncomingMessage, limit = 1 << 20): Promise<unknown> {
    const chunks: Buffer[] = [];
    let n = 0;
    for await (const c of req as AsyncIterable<Buffer>) {
      n += c.length;
      if (n > limit) throw new HttpError(413, "body too large");
      chunks.push(c);
    }
    const text = Buffer.concat(chunks).toString("utf8");
    if (text.trim() === "") return {};
    try {
      return JSON.parse(text);
    } catch {
      throw new HttpError(400, "body is not JSON");
    }
  }

  async function modelInfo(repo: string, rev: string, res: http.ServerResponse) {
    const { commit, dir } = resolveRevision(repo, rev);
    const files = (await listTree(dir, "", true)).filter((e) => e.type === "file");
    const st = await fs.promises.stat(dir);
    const lastModified = new Date(Math.floor(st.mtimeMs / 1000) * 1000).toISOString();
    sendJson(res, 200, {
      _id: createHash("sha1").update(`id ${repo}`).digest("hex").slice(0, 24),
      id: repo,
      modelId: repo,
      author: repo.includes("/") ? repo.split("/")[0] : undefined,
      sha: commit,
      lastModified,
      createdAt: lastModified,
      private: false,
      gated: false,
      disabled: false,
      downloads: 0,
      likes: 0,
      library_name: "gguf",
      pipeline_tag: "text-generation",
      tags: ["gguf", "llama", "text-generation"],
      siblings: files.map((f) => ({
        rfilename: f.path,
        size: f.size,
        blobId: f.oid,
        ...(f.lfs
          ? {
              lfs: {
                sha256: (f.lfs as { oid: string }).oid,
                size: f.size,
                pointerSize: (f.lfs as { pointerSize: number }).pointerSize,
              },
            }
          : {}),
      })),
      usedStorage: files.reduce((a, f) => a + Number(f.size), 0),
    });
  }

  async function serveFile(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    repo: string,
    rev: string,
    repoPath: string,
    applied: string[],
  ) {
    const { commit, dir } = resolveRevision(repo, rev);
    const abs = resolveInCommit(dir, repoPath);
    const st = await fs.promises.stat(abs).catch(() => null);
    if (!st || !st.isFile())
      throw new HttpError(404, `Entry not found: ${repoPath}`, "EntryNotFound");
    const meta = await fileMeta(abs, repoPath);
    const size = meta.size;
    const f = faults;
    const targeted = !f.pathSuffix || repoPath.endsWith(f.pathSuffix);
    const headers: Record<string, string | number> = {
      "Content-Type": "application/octet-stream",
      "X-Repo-Commit": commit,
      ETag: `"${meta.lfs ? meta.sha256 : meta.oid}"`,
      "Content-Disposition": `inline; filename="${path.basename(repoPath).replace(/"/g, "")}"`,
      "Cache-Control": "private, max-age=0",
    };
    if (meta.lfs) {
      headers["X-Linked-Etag"] = `"${meta.sha256}"`;
      headers["X-Linked-Size"] = String(size);
    }
    if (targeted && f.redirectTo && req.method === "GET") {
      applied.push("redirect");
      const u = new URL(req.url ?? "/", "http://x");
      res.writeHead(302, {
        Location: `${f.redirectTo.replace(/\/+$/, "")}${u.pathname}${u.search}`,
      });
      res.end();
      return;
    }
    const ignoreRange = targeted && !!f.ignoreRange;
    if (!ignoreRange) headers["Accept-Ranges"] = "bytes";
    let range = ignoreRange ? null : parseRange(req.headers.range, size);
    if (ignoreRange && req.headers.range) applied.push("ignoreRange");
    if (range === "unsatisfiable") {
      res.writeHead(416, { ...headers, "Content-Range": `bytes */${size}`, "Content-Length": 0 });
      res.end();
      return;
    }
    let status = 200;
    let start = 0;
    let end = size - 1;
    if (range) {
      status = 206;
      ({ start, end } = range);
      headers["Content-Range"] = `bytes ${start}-${end}/${size}`;
    }
    range = null;
    const length = end - start + 1;
    headers["Content-Length"] = String(Math.max(0, length));
    if (targeted && f.contentLength !== undefined) {
      headers["Content-Length"] = f.contentLength;
      applied.push("contentLength");
    }
    res.writeHead(status, headers);
    if (req.method === "HEAD" || length <= 0) {
      res.end();
      return;
    }

    let cutAt: number | null = null;
    if (targeted && f.cutAfterBytes != null && length > f.cutAfterBytes) {
      cutAt = f.cutAfterBytes;
      applied.push(`cut@${cutAt}`);
      if ((f.cutMode ?? "once") === "once") faults = { ...faults, cutAfterBytes: null };
    }
    const flipAt = targeted && f.wrongBytes ? (f.wrongBytesOffset ?? Math.floor(size / 2)) : null;
    if (flipAt != null && flipAt >= start && flipAt <= end) applied.push(`wrongByte@${flipAt}`);
    const rate = targeted && f.throttleBytesPerSec ? f.throttleBytesPerSec : null;
    if (rate) applied.push(`throttle@${rate}`);

    const chunkSize = rate ? Math.max(1, Math.min(64 * 1024, Math.floor(rate / 10))) : 256 * 1024;
    const fh = await fs.promises.open(abs, "r");
    let closed = false;
    res.on("close", () => (closed = true));
    const t0 = Date.now();
    let sent = 0;
    try {
      const buf = Buffer.alloc(chunkSize);
      while (sent < length && !closed) {
        let want = Math.min(chunkSize, length - sent);
        if (cutAt != null) want = Math.min(want, cutAt - sent);
        const { bytesRead } = await fh.read(buf, 0, want, start + sent);
        if (bytesRead === 0) break;
        const chunk = Buffer.from(buf.subarray(0, bytesRead));
        const pos = start + sent;
        if (flipAt != null && flipAt >= pos && flipAt < pos + bytesRead) {
          chunk[flipAt - pos] = (chunk[flipAt - pos] ?? 0) ^ 0xff;
        }
        sent += bytesRead;
        if (cutAt != null && sent >= cutAt) {
          // Let the bytes reach the socket, then drop the connection without finishing the body.
          await new Promise<void>((r) => res.write(chunk, () => r()));
          res.socket?.destroy();
          return;
        }
        const ok = res.write(chunk);
        if (!ok && !closed) await drainOrClose(res);
        if (rate && sent < length) {
          const due = t0 + (sent / rate) * 1000;
          const wait = due - Date.now();
          if (wait > 0) await new Promise((r) => setTimeout(r, wait));
        }
      }
      if (!closed) res.end();
    } finally {
      await fh.close();
    }
  }

  async function handle(req: http.IncomingMessage, res: http.ServerResponse, applied: string[]) {
    const url = new URL(req.url ?? "/", "http://x");
    const method = req.method ?? "GET";
    const segs = url.pathname.split("/").slice(1);
    const dec = (s: string) => {
      try {
        return decodeURIComponent(s);
      } catch {
        throw new HttpError(400, "bad escape in path");
      }
    };

    if (segs[0] === "_admin") {
      if (!adminEnabled) throw new HttpError(404, "not found");
      const what = segs.slice(1).join("/");
      if (what === "faults") {
        if (method === "GET") return sendJson(res, 200, faults);
        if (method === "DELETE") {
          faults = {};
          return sendJson(res, 200, faults);
        }
        if (method === "POST" || method === "PUT") {
          const parsed = HfFaultsSchema.safeParse(await readBody(req));
          if (!parsed.success) throw new HttpError(400, `invalid faults: ${parsed.error.message}`);
          faults = parsed.data;
          return sendJson(res, 200, faults);
        }
      }
      if (what === "log") {
        if (method === "GET") return sendJson(res, 200, entries);
        if (method === "DELETE") {
          entries.length = 0;
          return sendJson(res, 200, []);
        }
      }
      throw new HttpError(404, "no such admin route");
    }

    if (opts.token !== undefined) {
      const auth = req.headers.authorization ?? "";
      const m = /^Bearer\s+(.+)$/i.exec(auth);
      if (!m || m[1] !== opts.token) {
        throw new HttpError(
          401,
          m ? "Invalid credentials in Authorization header" : "Authorization required",
        );
      }
    }

    // /api/models/{org}/{name}/...
    if (segs[0] === "api" && segs[1] === "models") {
      const rest = segs.slice(2);
      const ops = ["revision", "tree", "paths-info"];
      let split = rest.findIndex((s, i) => i > 0 && ops.includes(s));
      if (split === -1) split = rest.length;
      const repo = rest.slice(0, split).map(dec).join("/");
      if (!isValidRepoId(repo)) throw new HttpError(404, "Repository not found", "RepoNotFound");
      const op = rest[split];
      const rev = rest[split + 1] !== undefined ? dec(rest[split + 1] ?? "") : "main";
      const sub = rest
        .slice(split + 2)
        .map(dec)
        .filter((s) => s !== "")
        .join("/");
      if (op === undefined && (method === "GET" || method === "HEAD"))
        return modelInfo(repo, "main", res);
      if (op === "revision" && (method === "GET" || method === "HEAD"))
        return modelInfo(repo, rev, res);
      if (op === "tree" && method === "GET") {
        const { commit, dir } = resolveRevision(repo, rev);
        const recursive = url.searchParams.get("recursive") === "true";
        const expand = url.searchParams.get("expand") === "true";
        const items = await listTree(dir, sub, recursive);
        if (expand) {
          for (const it of items)
            it.lastCommit = {
              id: commit,
              title: "sparkform test commit",
              date: new Date(0).toISOString(),
            };
        }
        return sendJson(res, 200, items);
      }
      if (op === "paths-info" && method === "POST") {
        const { dir } = resolveRevision(repo, rev);
        const body = (await readBody(req)) as { paths?: unknown };
        const paths = Array.isArray(body.paths) ? body.paths.map(String) : [];
        const items: Array<Record<string, unknown>> = [];
        for (const p of paths) {
          const abs = resolveInCommit(dir, p);
          const st = await fs.promises.stat(abs).catch(() => null);
          if (st?.isFile()) items.push(await treeEntry(dir, p));
          else if (st?.isDirectory())
            items.push({
              type: "directory",
              oid: createHash("sha1").update(`tree ${p}`).digest("hex"),
              size: 0,
              path: p,
            });
        }
        return sendJson(res, 200, items);
      }
      throw new HttpError(404, "not found");
    }

    // /{org}/{name}/resolve/{rev}/{path...}   (also /{name}/resolve/...)
    const at = segs.findIndex((s, i) => i > 0 && i <= 2 && s === "resolve");
    if (at !== -1 && (method === "GET" || method === "HEAD")) {
      const repo = segs.slice(0, at).map(dec).join("/");
      if (!isValidRepoId(repo)) throw new HttpError(404, "Repository not found", "RepoNotFound");
      const rev = dec(segs[at + 1] ?? "");
      const repoPath = segs
        .slice(at + 2)
        .map(dec)
        .join("/");
      if (!rev || !repoPath) throw new HttpError(404, "Entry not found", "EntryNotFound");
      return serveFile(req, res, repo, rev, repoPath, applied);
    }
    throw new HttpError(404, "not found");
  }

  const onRequest = (req: http.IncomingMessage, res: http.ServerResponse) => {
    const t0 = Date.now();
    const applied: string[] = [];
    const isAdmin = (req.url ?? "").startsWith("/_admin");
    let bytes = 0;
    const origWrite = res.write.bind(res) as (...a: unknown[]) => boolean;
    const origEnd = res.end.bind(res) as (...a: unknown[]) => http.ServerResponse;
    const count = (c: unknown) => {
      if (req.method === "HEAD") return;
      if (typeof c === "string") bytes += Buffer.byteLength(c);
      else if (c instanceof Uint8Array) bytes += c.length;
    };
    res.write = ((...a: unknown[]) => {
      count(a[0]);
      return origWrite(...a);
    }) as typeof res.write;
    res.end = ((...a: unknown[]) => {
      if (typeof a[0] !== "function") count(a[0]);
      return origEnd(...a);
    }) as typeof res.end;
    res.on("close", () => {
      if (isAdmin) return;
      const url = new URL(req.url ?? "/", "http://x");
      const entry: HfLogEntry = {
        time: new Date(t0).toISOString(),
        method: req.method ?? "",
        path: url.pathname + url.search,
        range: req.headers.range ?? null,
        status: res.statusCode,
        bytes,
        auth: req.headers.authorization !== undefined,
        remote: req.socket.remoteAddress ?? null,
        ms: Date.now() - t0,
        ...(applied.length ? { faults: applied } : {}),
        complete: res.writableFinished,
        tls: (req.socket as Partial<TLSSocket>).encrypted === true,
      };
      entries.push(entry);
      logStream?.write(JSON.stringify(entry) + "\n");
    });
    handle(req, res, applied).catch((err: unknown) => {
      const status = err instanceof HttpError ? err.status : 500;
      const message = err instanceof Error ? err.message : String(err);
      if (res.headersSent) {
        res.destroy();
        return;
      }
      const headers: Record<string, string> = {};
      if (err instanceof HttpError && err.code) headers["X-Error-Code"] = err.code;
      if (status === 401) headers["WWW-Authenticate"] = 'Bearer realm="sparkform-hf-endpoint"';
      if (status !== 401 && req.method !== "HEAD")
        headers["X-Error-Message"] = message.replace(/[^\x20-\x7e]/g, "?");
      sendJson(res, status, { error: message }, headers);
    });
  };
  const plain = http.createServer(onRequest);
  const secure = opts.tls ? https.createServer(opts.tls, onRequest) : undefined;
  // With TLS, one listener answers both: it reads a connection's first bytes (0x16 starts a TLS
  // handshake record) and relays the connection to an internal TLS or plain server on loopback
  // (Node's TLS server reads a socket's handle directly, so bytes already read cannot be given
  // back to it). Test-only: the log's `remote` is then the relay's loopback address.
  const internal = new Map<"tls" | "plain", number>();
  const listenLocal = (srv: net.Server) =>
    new Promise<number>((resolve, reject) => {
      srv.once("error", reject);
      srv.listen(0, "127.0.0.1", () => resolve((srv.address() as AddressInfo).port));
    });
  if (secure) {
    internal.set("tls", await listenLocal(secure));
    internal.set("plain", await listenLocal(plain));
  }
  const relays = new Set<net.Socket>();
  const server: net.Server = secure
    ? net.createServer((socket) => {
        relays.add(socket);
        socket.on("close", () => relays.delete(socket));
        socket.on("error", () => socket.destroy());
        socket.once("data", (first) => {
          const port = internal.get(first[0] === 0x16 ? "tls" : "plain")!;
          const up = net.connect(port, "127.0.0.1");
          relays.add(up);
          up.on("close", () => {
            relays.delete(up);
            socket.destroy();
          });
          up.on("error", () => socket.destroy());
          socket.on("close", () => up.destroy());
          up.write(first);
          socket.pipe(up);
          up.pipe(socket);
        });
      })
    : plain;
  await new Promise<void>((resolve, reject) => {
    server.once("error", reject);
    server.listen(opts.port ?? 0, host, () => {
      server.off("error", reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const urlHost = host.includes(":") ? `[${host}]` : host;

  return {
    url: `http://${urlHost}:${port}`,
    ...(secure ? { httpsUrl: `https://${urlHost}:${port}` } : {}),
    host,
    port,
    async close() {
      for (const r of relays) r.destroy();
      plain.closeAllConnections();
      secure?.closeAllConnections();
      if (secure) {
        await new Promise<void>((r) => secure.close(() => r()));
        await new Promise<void>((r) => plain.close(() => r()));
      }
      await new Promise<void>((r) => server.close(() => r()));
      if (logStream) await new Promise<void>((r) => logStream.end(r));
    },
    setFaults(f: HfFaults) {
      faults = HfFaultsSchema.parse(f);
    },
    getFaults() {
      return { ...faults };
    },
    log() {
      return entries.map((e) => ({ ...e }));
    },
    clearLog() {
      entries.length = 0;
    },
  };
}
