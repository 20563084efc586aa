// Resolution of a model on the control node, before anything runs on a node: revision → commit
// sha, each file's size and SHA-256 from the hub's metadata (LFS oid), checked against the
// stack's expected SHA-256; and the GGUF header read with range requests. Plain data in and
// out; the only I/O is HTTP to the endpoint, through @huggingface/hub and @huggingface/gguf.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { gguf, GGMLFileQuantizationType, GGMLQuantizationType } from "@huggingface/gguf";
import { HubApiError, modelInfo, pathsInfo } from "@huggingface/hub";
import { headerProblems } from "./header";
import { endpointProblem, tokenSafeFetch } from "./token-fetch";

export const PUBLIC_HUB = "https://huggingface.co";

export interface ResolveRequest {
  /** HF_ENDPOINT-style base URL. */
  readonly endpoint: string;
  /** Bearer token (a secret: never part of any message or result). */
  readonly token?: string;
  /**
   * Why sparkform:hfToken was not sent to this endpoint, when it was withheld (token-origin.ts):
   * added to an HTTP 401/403, so the operator reads why and the opt-in, not just "no token".
   */
  readonly tokenWithheld?: string;
  readonly repo: string;
  readonly revision: string;
  readonly files: readonly string[];
  /** Expected SHA-256 per file path, from the stack. */
  readonly sha256?: Readonly<Record<string, string>>;
  readonly allowBranch: boolean;
  /** For tests: a fetch to use instead of the global one. */
  readonly fetch?: typeof fetch;
  /**
   * Keep GGUF header summaries here, keyed by the files' SHA-256s (content-addressed, so never
   * stale): later previews do not read the headers again. Default: no cache.
   */
  readonly cacheDir?: string;
}

export interface ResolvedFile {
  readonly path: string;
  readonly size: number;
  readonly sha256: string;
  /** Where the node downloads it from (pinned to the commit; carries no credentials). */
  readonly url: string;
}

/** What memory planning and the policy pack need from the GGUF header. */
export interface GgufSummary {
  readonly architecture: string;
  /** `<arch>.block_count`: transformer layers. */
  readonly blockCount: number;
  readonly contextLength: number;
  readonly embeddingLength: number;
  readonly feedForwardLength?: number;
  readonly headCount: number;
  readonly headCountKv: number;
  /**
   * `<arch>.attention.key_length` / `value_length`: the per-head K and V sizes, which the KV
   * cache is sized by (Qwen3: 128, not embedding / heads = 64); the header's value, else
   * embeddingLength / headCount as llama.cpp defaults it. Absent in summaries cached before.
   */
  readonly keyLength?: number;
  readonly valueLength?: number;
  /** `general.file_type` by name (e.g. "Q4_K_M"), else the most common tensor type. */
  readonly quantization: string;
  readonly tensorCount: number;
  /** Bytes of tensor data over all shards (file size minus header, summed). */
  readonly tensorDataBytes: number;
  readonly parameterCount: number;
  readonly shards: number;
}

export interface ResolvedModel {
  readonly endpoint: string;
  readonly repo: string;
  /** The revision as configured. */
  readonly revision: string;
  /** The 40-hex commit it resolved to. */
  readonly commit: string;
  /** True when `revision` named a branch or tag (only with allowBranch). */
  readonly followsBranch: boolean;
  readonly files: readonly ResolvedFile[];
  readonly totalBytes: number;
  readonly gguf?: GgufSummary;
}

export class ModelResolveError extends Error {
  override name = "ModelResolveError";
}

const SHARD = /^(.*)-(\d{5})-of-(\d{5})\.gguf$/;
const HEX40 = /^[0-9a-f]{40}$/;

/**
 * Files as the node stores them: a split GGUF named by any one shard stands for all its
 * shards, in order; duplicates dropped; otherwise the configured order.
 */
export function expandShards(files: readonly string[]): string[] {
  const out: string[] = [];
  for (const f of files) {
    const m = SHARD.exec(f);
    const names = m
      ? Array.from(
          { length: Number(m[3]) },
          (_, i) => `${m[1]}-${String(i + 1).padStart(5, "0")}-of-${m[3]}.gguf`,
        )
      : [f];
    for (const n of names) if (!out.includes(n)) out.push(n);
  }
  return out;
}

export function normalizeEndpoint(endpoint: string): string {
  return endpoint.replace(/\/+$/, "");
}

/** `<endpoint>/<repo>/resolve/<commit>/<path>`, each path segment escaped. */
export function resolveUrl(endpoint: string, repo: string, commit: string, file: string): string {
  const p = file.split("/").map(encodeURIComponent).join("/");
  return `${normalizeEndpoint(endpoint)}/${repo}/resolve/${commit}/${p}`;
}

/** The directory of one model revision on a node: `<modelsDir>/<repo>/<commit>`. */
export function modelDir(modelsDir: string, repo: string, commit: string): string {
  return `${modelsDir.replace(/\/+$/, "")}/${repo}/${commit}`;
}

function hubError(what: string, req: ResolveRequest, err: unknown): ModelResolveError {
  const where = `${req.repo}@${req.revision} at ${normalizeEndpoint(req.endpoint)}`;
  if (err instanceof HubApiError) {
    const hint =
      err.statusCode === 401 || err.statusCode === 403
        ? req.tokenWithheld
          ? `: the endpoint wants a token, and ${req.tokenWithheld}`
          : ": the endpoint wants a token that can read this repo (`pulumi config set --secret hfToken …`)"
        : err.statusCode === 404
          ? ": no such repo or revision there (check sparkform:model.repo and .revision)"
          : "";
    return new ModelResolveError(
      `${what} ${where} failed with HTTP ${err.statusCode}${hint} (${err.message})`,
    );
  }
  const msg = err instanceof Error ? err.message : String(err);
  const cause = err instanceof Error && err.cause instanceof Error ? ` (${err.cause.message})` : "";
  return new ModelResolveError(`${what} ${where} failed: ${msg}${cause}`);
}

/**
 * Resolve the revision to a commit and every file to its size and SHA-256. Fails closed: a
 * branch without allowBranch, a missing file, a file whose SHA-256 the hub does not give and
 * the stack does not pin, or a stack SHA-256 that disagrees with the hub.
 */
export async function resolveModel(req: ResolveRequest): Promise<ResolvedModel> {
  const endpoint = normalizeEndpoint(req.endpoint);
  const problem = endpointProblem(endpoint);
  if (problem) throw new ModelResolveError(`sparkform:model.endpoint ${problem}`);
  const creds = req.token ? { accessToken: req.token } : {};
  // Every request and redirect under the token rules (token-fetch.ts).
  const common = { hubUrl: endpoint, ...creds, fetch: tokenSafeFetch(req.fetch) };
  let commit: string;
  try {
    const info = await modelInfo({
      name: req.repo,
      revision: req.revision,
      additionalFields: ["sha"],
      ...common,
    });
    commit = String(info.sha ?? "");
  } catch (err) {
    throw hubError("resolving", req, err);
  }
  if (!HEX40.test(commit)) {
    throw new ModelResolveError(
      `resolving ${req.repo}@${req.revision}: the endpoint answered no commit sha (got ${JSON.stringify(commit)})`,
    );
  }
  const followsBranch = req.revision !== commit;
  if (followsBranch && !req.allowBranch) {
    throw new ModelResolveError(
      `sparkform:model.revision ${JSON.stringify(req.revision)} is a branch or tag (today it is ` +
        `commit ${commit}): pin that commit as the revision, or set allowBranch: true to follow it`,
    );
  }

  const paths = expandShards(req.files);
  let infos: Awaited<ReturnType<typeof pathsInfo>>;
  try {
    infos = await pathsInfo({
      repo: { type: "model", name: req.repo },
      paths,
      revision: commit,
      ...common,
    });
  } catch (err) {
    throw hubError("listing files of", req, err);
  }
  const byPath = new Map(infos.map((i) => [i.path, i]));
  const missing = paths.filter((p) => byPath.get(p)?.type !== "file");
  if (missing.length > 0) {
    throw new ModelResolveError(
      `${req.repo}@${commit} has no file ${missing.map((m) => JSON.stringify(m)).join(", ")}` +
        (missing.some((m) => SHARD.test(m)) ? " (all shards of a split GGUF must exist)" : ""),
    );
  }
  const files = paths.map((p): ResolvedFile => {
    const info = byPath.get(p)!;
    const hub = info.lfs?.oid?.toLowerCase();
    const pinned = req.sha256?.[p];
    if (hub && pinned && hub !== pinned) {
      throw new ModelResolveError(
        `sparkform:model.sha256[${JSON.stringify(p)}] is ${pinned}, but ${req.repo}@${commit} ` +
          `says ${hub}: refusing a model the stack did not expect (fix the pinned sha256 or the revision)`,
      );
    }
    const sha256 = hub ?? pinned;
    if (!sha256 || !/^[0-9a-f]{64}$/.test(sha256)) {
      throw new ModelResolveError(
        `${req.repo}@${commit}: ${p} is not an LFS file, so the hub gives no SHA-256 for it; ` +
          `pin one in sparkform:model.sha256 (downloads are verified fail-closed)`,
      );
    }
    const size = info.lfs?.size ?? info.size;
    return { path: p, size, sha256, url: resolveUrl(endpoint, req.repo, commit, p) };
  });
  const resolved: ResolvedModel = {
    endpoint,
    repo: req.repo,
    revision: req.revision,
    commit,
    followsBranch,
    files,
    totalBytes: files.reduce((a, f) => a + f.size, 0),
  };
  const ggufs = files.filter((f) => f.path.endsWith(".gguf"));
  if (ggufs.length === 0) return resolved;
  return { ...resolved, gguf: await cachedGgufSummary(ggufs, req) };
}

/** The default cache of GGUF header summaries on the control node. */
export function defaultGgufCacheDir(): string {
  const base = process.env.XDG_CACHE_HOME ?? path.join(process.env.HOME ?? "/tmp", ".cache");
  return path.join(base, "sparkform", "gguf-headers");
}

async function cachedGgufSummary(
  shards: readonly ResolvedFile[],
  req: ResolveRequest,
): Promise<GgufSummary> {
  if (!req.cacheDir) return readGgufSummary(shards, req);
  const key = createHash("sha256")
    .update(shards.map((s) => `${s.sha256} ${s.size}\n`).join(""))
    .digest("hex");
  const file = path.join(req.cacheDir, `${key}.json`);
  try {
    const cached = JSON.parse(fs.readFileSync(file, "utf8")) as GgufSummary;
    // A cache file is read as the header would be: a value out of range reads the header again.
    if (
      typeof cached.architecture === "string" &&
      cached.shards === shards.length &&
      typeof cached.keyLength === "number" &&
      headerProblems(cached).length === 0
    )
      return cached;
  } catch {
    // absent or unreadable: read the headers again
  }
  const summary = await readGgufSummary(shards, req);
  try {
    fs.mkdirSync(req.cacheDir, { recursive: true });
    const tmp = `${file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify(summary));
    fs.renameSync(tmp, file);
  } catch {
    // a cache that cannot be written only costs the next preview a header read
  }
  return summary;
}

function num(v: unknown): number | undefined {
  if (typeof v === "number") return v;
  if (typeof v === "bigint") return Number(v);
  return undefined;
}

/**
 * The GGUF header of every shard, read with range requests (only the header bytes move):
 * architecture and shape from the first shard, tensor bytes and counts summed over shards.
 */
export async function readGgufSummary(
  shards: readonly ResolvedFile[],
  req: Pick<ResolveRequest, "token" | "fetch" | "repo" | "tokenWithheld">,
): Promise<GgufSummary> {
  const headers = req.token ? { Authorization: `Bearer ${req.token}` } : undefined;
  const parsed = [];
  for (const s of shards) {
    try {
      parsed.push(
        await gguf(s.url, {
          computeParametersCount: true,
          ...(headers ? { additionalFetchHeaders: headers } : {}),
          fetch: tokenSafeFetch(req.fetch),
        }),
      );
    } catch (err) {
      const msg = (err as Error).message;
      const withheld = req.tokenWithheld && /\b40[13]\b/.test(msg) ? `; ${req.tokenWithheld}` : "";
      throw new ModelResolveError(
        `reading the GGUF header of ${req.repo}/${s.path} with range requests failed: ${msg}${withheld}`,
      );
    }
  }
  const first = parsed[0]!;
  const md = first.metadata as unknown as Record<string, unknown>;
  const arch = String(md["general.architecture"] ?? "");
  const key = (k: string) => num(md[`${arch}.${k}`]);
  const fileType = num(md["general.file_type"]);
  const typeCounts = new Map<string, number>();
  for (const p of parsed) {
    for (const t of p.tensorInfos) {
      const name = GGMLQuantizationType[t.dtype] ?? String(t.dtype);
      typeCounts.set(name, (typeCounts.get(name) ?? 0) + 1);
    }
  }
  const dominant = [...typeCounts.entries()].sort((a, b) => b[1] - a[1])[0]?.[0] ?? "unknown";
  const quantization =
    fileType !== undefined && GGMLFileQuantizationType[fileType] !== undefined
      ? String(GGMLFileQuantizationType[fileType])
      : dominant;
  const headCount = key("attention.head_count") ?? 0;
  const embedding = key("embedding_length") ?? 0;
  const perHead = headCount > 0 ? Math.floor(embedding / headCount) : 0;
  const summary: GgufSummary = {
    architecture: arch,
    blockCount: key("block_count") ?? 0,
    contextLength: key("context_length") ?? 0,
    embeddingLength: key("embedding_length") ?? 0,
    ...(key("feed_forward_length") !== undefined
      ? { feedForwardLength: key("feed_forward_length") }
      : {}),
    headCount: key("attention.head_count") ?? 0,
    headCountKv: key("attention.head_count_kv") ?? key("attention.head_count") ?? 0,
    keyLength: key("attention.key_length") ?? perHead,
    valueLength: key("attention.value_length") ?? perHead,
    quantization,
    tensorCount: parsed.reduce((a, p) => a + p.tensorInfos.length, 0),
    tensorDataBytes: parsed.reduce(
      (a, p, i) => a + (shards[i]!.size - Number(p.tensorDataOffset)),
      0,
    ),
    parameterCount: parsed.reduce((a, p) => a + p.parameterCount, 0),
    shards: shards.length,
  };
  const problems = headerProblems(summary);
  if (problems.length > 0)
    throw new ModelResolveError(
      `the GGUF header of ${req.repo}/${shards[0]!.path} is not one llama.cpp loads: ` +
        `${problems.join("; ")}. Nothing was planned or downloaded; check that ` +
        "sparkform:model.repo, revision and files name the model you mean",
    );
  return summary;
}
