// What the CLI keeps of a stack between runs (.sparkform/cache/), and how it knows it is still
// true: each entry is stored under a digest of everything its pulumi read depends on, and
// used only while that digest is unchanged.
//
// - outputs (`pulumi stack output`), and the evidence `status --json` reads from
//   `pulumi stack export` (cli/evidence.ts): the stack's state file in the backend;
// - configuration (`pulumi config`, parsed by the schema): the stack's file
//   (stacks/Pulumi.<stack>.yaml), Pulumi.yaml (project config, stackConfigDir), and the CLI's
//   own build, since the parse is the code's (bin/sparkform.js names the bundle it runs; from
//   the TypeScript sources, nothing parsed is cached).
// Both also depend on the backend, the project directory and the recorded pulumi toolchain. A
// file counts by size, mtime, ctime and inode (ctime cannot be set back), so `pulumi up`,
// `pulumi config set`, `sim up` rewriting the stack file, or an edit by hand each make the next
// read go through pulumi again. On a PostgreSQL backend (a team's, issue 36) the state is the
// checkpoint row of the backend's table, counted by its `updated_at`, which one psql query
// reads (cli/team/libpq.ts; 45–80 ms, against 0.5–1.2 s of `pulumi stack output`): an `up`
// from another checkout rewrites the row, so this checkout's next read goes through pulumi
// again. The query runs once per process (every outputs kind shares it) and again after this
// process ran the engine (forgetCheckpoints); when psql cannot answer, nothing is cached. With
// any other backend (Pulumi Cloud, a bucket), a stack file whose values come from an ESC
// environment, or a stack name that is not a plain name, nothing is cached.
import { createHash } from "node:crypto";
import * as fs from "node:fs";
import * as path from "node:path";
import { repoRoot, stateDir } from "../setup/pulumi/env";
import { type Backend, currentBackend } from "./team/backend";
import { checkpointStampSync, psqlEnv } from "./team/libpq";

/** Bumped when an entry's shape changes: older entries then never match. */
const FORMAT = 1;
const STACK_NAME = /^[A-Za-z0-9][A-Za-z0-9._-]*$/;

let build: string | undefined;

/** The CLI build that runs (the bundle's name), or undefined from the sources. */
export function setCliBuild(id: string | undefined): void {
  build = id;
}

export interface CacheKey {
  /** The entry's file. */
  readonly file: string;
  /** Digest of what the entry depends on. */
  readonly key: string;
}

function signature(file: string): string {
  try {
    const st = fs.statSync(file, { bigint: true });
    return `${st.size}:${st.mtimeNs}:${st.ctimeNs}:${st.ino}`;
  } catch {
    return "absent";
  }
}

/**
 * `key: value` at the top level of a YAML file (Pulumi.yaml's name and stackConfigDir, a stack
 * file's encryptionsalt and secretsprovider).
 */
export function yamlScalar(text: string, key: string): string | undefined {
  const m = new RegExp(`^${key}:[ \\t]*["']?([^"'#\\n]*?)["']?[ \\t]*(#.*)?$`, "m").exec(text);
  return m?.[1] || undefined;
}

export interface Project {
  readonly dir: string;
  readonly name: string;
  readonly file: string;
  readonly stackConfigDir: string;
}

/** The Pulumi project in `projectDir` (its Pulumi.yaml's name and stackConfigDir), if any. */
export function project(projectDir: string): Project | undefined {
  const file = path.join(projectDir, "Pulumi.yaml");
  let text: string;
  try {
    text = fs.readFileSync(file, "utf8");
  } catch {
    return undefined;
  }
  const name = yamlScalar(text, "name");
  if (!name) return undefined;
  const dir = yamlScalar(text, "stackConfigDir");
  return { dir: projectDir, name, file, stackConfigDir: path.resolve(projectDir, dir ?? ".") };
}

/** The libpq variables that choose which server and database a `postgres://` URL reaches. */
const PG_WHERE = ["PGHOST", "PGHOSTADDR", "PGPORT", "PGDATABASE", "PGUSER", "PGSERVICE"];

/**
 * What names the backend in a key, or undefined when nothing of it is cached: a file backend's
 * directory; a PostgreSQL URL (its password taken out), its table, and what the operator's PG*
 * variables fill in of the connection (`postgres://` alone is valid).
 */
function backendId(b: Backend): string | undefined {
  if (b.kind === "file") return b.dir;
  if (b.kind !== "postgres") return undefined;
  const env = psqlEnv(b);
  return JSON.stringify([b.url, b.table, ...PG_WHERE.map((v) => env[v] ?? "")]);
}

/** The checkpoint rows' stamps this process read, per backend, table, project and stack. */
const stamps = new Map<string, string | undefined>();

/**
 * Forget the checkpoint stamps read so far: after this process ran the engine (`up`, `refresh`),
 * the row it read before is no longer the stack's.
 */
export function forgetCheckpoints(): void {
  stamps.clear();
}

/** What the stack's state is now: its state files' signatures, or its checkpoint row's stamp. */
function stateSignature(b: Backend, p: Project, stack: string): string[] | undefined {
  if (b.kind === "file") {
    const stacks = path.join(b.dir, ".pulumi", "stacks");
    // The project-scoped layout and the older flat one, each plain or gzipped.
    return [path.join(stacks, p.name), stacks].flatMap((d) =>
      [".json", ".json.gz"].map((ext) => signature(path.join(d, `${stack}${ext}`))),
    );
  }
  if (b.kind !== "postgres") return undefined;
  const id = JSON.stringify([backendId(b), p.name, stack]);
  if (!stamps.has(id)) stamps.set(id, checkpointStampSync(b, p.name, stack));
  const stamp = stamps.get(id);
  return stamp === undefined ? undefined : [stamp];
}

function keyOf(stack: string, kind: string, parts: readonly string[]): CacheKey {
  const toolchain = signature(path.join(repoRoot, ".sparkform", "toolchain.env"));
  const key = createHash("sha256")
    .update(JSON.stringify([FORMAT, kind, stack, repoRoot, toolchain, ...parts]))
    .digest("hex");
  return { file: path.join(stateDir(), "cache", `${kind}-${stack}.json`), key };
}

/**
 * The key of `pulumi stack output` of `stack` (kinds `evidence` and `recorded`: what `status
 * --json` and the node commands read of `pulumi stack export`, which depends on the same state),
 * or undefined when it cannot be cached (on PostgreSQL: also when psql cannot read the
 * checkpoint row, so an entry is never served on a state nobody looked at).
 */
export function outputsKey(
  stack: string,
  projectDir = repoRoot,
  kind: "outputs" | "evidence" | "recorded" = "outputs",
): CacheKey | undefined {
  const p = project(projectDir);
  const b = currentBackend();
  const backend = backendId(b);
  if (!p || !backend || !STACK_NAME.test(stack)) return undefined;
  const state = stateSignature(b, p, stack);
  return state && keyOf(stack, kind, [p.dir, backend, ...state]);
}

/** The key of `stack`'s parsed configuration, or undefined when it cannot be cached. */
export function configKey(stack: string, projectDir = repoRoot): CacheKey | undefined {
  const p = project(projectDir);
  const backend = backendId(currentBackend());
  if (!build || !p || !backend || !STACK_NAME.test(stack)) return undefined;
  const files = [".yaml", ".yml"].map((ext) =>
    path.join(p.stackConfigDir, `Pulumi.${stack}${ext}`),
  );
  for (const f of files) {
    try {
      // An ESC environment's values live outside any file here.
      if (/^environment:/m.test(fs.readFileSync(f, "utf8"))) return undefined;
    } catch {
      // absent
    }
  }
  return keyOf(stack, "config", [
    build,
    p.dir,
    backend,
    signature(p.file),
    ...files.map(signature),
  ]);
}

/** The entry under `k` when it is current, else what `read` returns (then stored). */
export function cached<T>(k: CacheKey | undefined, read: () => T): T {
  if (!k) return read();
  try {
    const entry = JSON.parse(fs.readFileSync(k.file, "utf8")) as { key?: string; value?: T };
    if (entry.key === k.key && entry.value !== undefined) return entry.value;
  } catch {
    // none yet, or unreadable: read through pulumi
  }
  // The key was taken before the read: a change during it leaves an entry that never matches.
  const value = read();
  try {
    fs.mkdirSync(path.dirname(k.file), { recursive: true, mode: 0o700 });
    const tmp = `${k.file}.${process.pid}.tmp`;
    fs.writeFileSync(tmp, JSON.stringify({ key: k.key, value }), { mode: 0o600 });
    fs.renameSync(tmp, k.file);
  } catch {
    // a cache that cannot be written costs the next run a read, nothing else
  }
  return value;
}

/**
 * The stack `pulumi` has selected for the project (what `pulumi stack --show-name` prints),
 * read from its workspace file (PULUMI_HOME/workspaces/<project>-<sha1 of Pulumi.yaml's
 * path>-workspace.json) instead of a pulumi process; undefined when there is none.
 */
export function selectedStackName(projectDir = repoRoot): string | undefined {
  const p = project(projectDir);
  if (!p) return undefined;
  const home = process.env.PULUMI_HOME ?? path.join(stateDir(), "pulumi-home");
  const hash = createHash("sha1").update(p.file).digest("hex");
  try {
    const ws = JSON.parse(
      fs.readFileSync(path.join(home, "workspaces", `${p.name}-${hash}-workspace.json`), "utf8"),
    ) as { stack?: unknown };
    const stack = typeof ws.stack === "string" ? ws.stack.split("/").pop() : undefined;
    return stack && STACK_NAME.test(stack) ? stack : undefined;
  } catch {
    return undefined;
  }
}
