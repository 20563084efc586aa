// Issue 36 item 4, the fast CLI for a shared backend: how long `sparkform status` takes to start
// for the same stack on a local file:// backend and on PostgreSQL, its outputs served by the
// stack cache (cli/stack-cache.ts) on both. Goal: the PostgreSQL one within 0.2 s of the local
// one, measured in the same run. The baseline is what each start would cost without the cache,
// `pulumi stack output` on each backend; the floors are `node -e 0` and the one psql query the
// PostgreSQL key costs. No simulated cluster: the stack is test/fixtures/drift-probe's tiny
// program (its resources are files in a temporary directory), `up` once on each backend, each in
// a checkout of its own (project and state directory), on a PostgreSQL server of the bench's
// own (sim/world/postgres.ts). Every variant runs once per round, the order rotated each round,
// after one untimed run of each; a `status` sample that read through pulumi (its cache entry
// rewritten) is counted as a miss.
import { spawnSync } from "node:child_process";
import * as fs from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { parseBackend, type PostgresBackend } from "../cli/team/backend";
import { checkpointQuery, psqlArgs, psqlEnv } from "../cli/team/libpq";
import { pulumiBinary, pulumiEnv, repoRoot } from "../setup/pulumi/env";
import { type Postgres, startPostgres } from "../sim/world/postgres";
import { tailMarkdown } from "./lib/report";
import { rotation } from "./lib/rounds";
import { fmt, load1, summarizeOrEmpty, type Summary } from "./lib/stats";

/** At least this many rounds, whatever --runs says: the goal is a 0.2 s gap between medians. */
export const TEAM_CLI_MIN_ROUNDS = 10;
const PROBE = path.join(repoRoot, "test", "fixtures", "drift-probe");
const PROJECT = "driftprobe";
const STACK = "bench";
const BACKENDS = ["file://", "PostgreSQL"] as const;
type BackendName = (typeof BACKENDS)[number];

export const STATUS = (b: BackendName) => `status (${b})`;
export const UNCACHED = (b: BackendName) => `pulumi stack output (${b})`;
export const PSQL = "psql (the checkpoint query)";
export const FLOOR = "node -e 0";

interface Variant {
  readonly name: string;
  readonly argv: readonly string[];
  readonly cwd: string;
  readonly env: NodeJS.ProcessEnv;
  /** The `status` variants: their stack cache's outputs entry. */
  readonly entry?: string;
}

export interface TeamCliSample {
  variant: string;
  round: number;
  seconds: number;
  exitCode: number;
  /** A `status` that read the stack through pulumi (its cache entry was rewritten). */
  readPulumi?: boolean;
  load1: number;
}

export interface TeamCliResult {
  runs: number;
  variants: string[];
  commands: Record<string, string>;
  samples: TeamCliSample[];
  summary: Record<string, Summary>;
  /** status on PostgreSQL − on file://, per round (both cache hits). */
  paired: Summary;
  failures: string[];
}

/** One checkout of the probe's project: its directory, state directory and environment. */
function checkout(work: string, b: BackendName, pg: Postgres): NodeJS.ProcessEnv {
  const name = b === "file://" ? "file" : "postgres";
  const project = path.join(work, `${name}-project`);
  const state = path.join(work, `${name}-state`);
  fs.mkdirSync(project, { recursive: true });
  for (const f of ["Pulumi.yaml", "index.js"])
    fs.copyFileSync(path.join(PROBE, f), path.join(project, f));
  fs.symlinkSync(path.join(repoRoot, "node_modules"), path.join(project, "node_modules"));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    SPARKFORM_STATE_DIR: state,
    SPARKFORM_PROJECT_DIR: project,
    PULUMI_HOME: path.join(state, "pulumi-home"),
    PULUMI_BACKEND_URL: b === "file://" ? `file://${path.join(state, "backend")}` : pg.url,
    PULUMI_CONFIG_PASSPHRASE: "bench-team-cli",
    DRIFT_PROBE_DIR: path.join(work, "files"),
    ...(b === "PostgreSQL" ? pg.env : {}),
  };
  delete env.PULUMI_CONFIG_PASSPHRASE_FILE;
  delete env.PGPASSWORD;
  return env;
}

function must(argv: readonly string[], cwd: string, env: NodeJS.ProcessEnv): string {
  const [cmd, ...args] = argv as [string, ...string[]];
  const r = spawnSync(cmd, args, { cwd, env, encoding: "utf8", maxBuffer: 64 << 20 });
  if (r.status !== 0)
    throw new Error(`${argv.join(" ")} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
  return r.stdout;
}

/** The cache entry's identity (inode and mtime), or "-" when there is none. */
function entryId(file: string | undefined): string {
  if (!file) return "";
  try {
    const st = fs.statSync(file, { bigint: true });
    return `${st.ino}:${st.mtimeNs}`;
  } catch {
    return "-";
  }
}

export async function runTeamCli(o: {
  runs: number;
  log: (s: string) => void;
}): Promise<TeamCliResult> {
  const runs = Math.max(o.runs, TEAM_CLI_MIN_ROUNDS);
  const work = fs.mkdtempSync(path.join(os.tmpdir(), "bench-team-cli-"));
  fs.mkdirSync(path.join(work, "files", "spark-1"), { recursive: true });
  fs.mkdirSync(path.join(work, "files", "spark-2"), { recursive: true });
  o.log("team-cli: starting PostgreSQL");
  const pg = await startPostgres({ dir: path.join(work, "pg") });
  try {
    const cli = [process.execPath, path.join(repoRoot, "bin", "sparkform.js")];
    const vs: Variant[] = [
      { name: FLOOR, argv: [process.execPath, "-e", "0"], cwd: repoRoot, env: process.env },
    ];
    for (const b of BACKENDS) {
      const env = checkout(work, b, pg);
      const project = env.SPARKFORM_PROJECT_DIR as string;
      const pulumi = pulumiEnv(env);
      o.log(`team-cli: the stack on ${b}: init and up`);
      must(
        [pulumiBinary(), "stack", "init", STACK, "--secrets-provider", "passphrase"],
        project,
        pulumi,
      );
      must([pulumiBinary(), "up", "--yes", "--skip-preview", "-s", STACK], project, pulumi);
      vs.push(
        {
          name: STATUS(b),
          argv: [...cli, "status", "--stack", STACK],
          cwd: project,
          env,
          entry: path.join(env.SPARKFORM_STATE_DIR as string, "cache", `outputs-${STACK}.json`),
        },
        {
          name: UNCACHED(b),
          argv: [pulumiBinary(), "stack", "output", "--json", "-s", STACK],
          cwd: project,
          env: pulumi,
        },
      );
    }
    const backend = parseBackend(pg.url) as PostgresBackend;
    vs.push({
      name: PSQL,
      argv: ["psql", ...psqlArgs(checkpointQuery(backend, PROJECT, STACK))],
      cwd: repoRoot,
      env: psqlEnv(backend, { ...process.env, ...pg.env }),
    });
    // The command as a shell takes it, after the one setting that differs between the checkouts.
    const quote = (a: string) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a.replace(/'/g, "'\\''")}'`);
    const commands = Object.fromEntries(
      vs.map((v) => {
        const url = v.entry || v.name.startsWith("pulumi") ? v.env.PULUMI_BACKEND_URL : undefined;
        const line = v.argv.map(quote).join(" ");
        return [v.name, url ? `PULUMI_BACKEND_URL=${quote(url)} ${line}` : line];
      }),
    );
    const once = (v: Variant) => {
      const [cmd, ...args] = v.argv as [string, ...string[]];
      return spawnSync(cmd, args, {
        cwd: v.cwd,
        env: v.env,
        encoding: "utf8",
        maxBuffer: 64 << 20,
      });
    };
    // Untimed: the CLI's bundle and code cache, the stack cache's first entries, the OS's caches.
    for (const v of vs) {
      const r = once(v);
      if (r.status !== 0)
        throw new Error(`${commands[v.name]} failed (exit ${r.status}):\n${r.stdout}${r.stderr}`);
    }
    const samples: TeamCliSample[] = [];
    const failures: string[] = [];
    for (let round = 0; round < runs; round++) {
      o.log(`team-cli: round ${round + 1}/${runs}`);
      for (const v of rotation(vs, round)) {
        const before = entryId(v.entry);
        const load = load1();
        const t = process.hrtime.bigint();
        const r = once(v);
        const seconds = Number(process.hrtime.bigint() - t) / 1e9;
        const exitCode = r.status ?? 1;
        if (exitCode !== 0)
          failures.push(
            `${v.name} round ${round + 1}: exit ${exitCode}: ${`${r.stdout}${r.stderr}`.trim().slice(-400)}`,
          );
        samples.push({
          variant: v.name,
          round,
          seconds,
          exitCode,
          ...(v.entry ? { readPulumi: entryId(v.entry) !== before } : {}),
          load1: load,
        });
      }
    }
    const ok = (s: TeamCliSample) => s.exitCode === 0 && !s.readPulumi;
    const summary = Object.fromEntries(
      vs.map((v) => [
        v.name,
        summarizeOrEmpty(
          samples.filter((s) => s.variant === v.name && ok(s)).map((s) => s.seconds),
        ),
      ]),
    );
    const paired = [...Array(runs).keys()].flatMap((round) => {
      const [f, p] = BACKENDS.map((b) =>
        samples.find((s) => s.round === round && s.variant === STATUS(b) && ok(s)),
      );
      return f && p ? [p.seconds - f.seconds] : [];
    });
    return {
      runs,
      variants: vs.map((v) => v.name),
      commands,
      samples,
      summary,
      paired: summarizeOrEmpty(paired),
      failures,
    };
  } finally {
    await pg.stop();
    fs.rmSync(work, { recursive: true, force: true });
  }
}

const ms = (s: number) => `${s >= 0 ? "+" : ""}${(s * 1000).toFixed(0)} ms`;

export function teamCliMarkdown(r: TeamCliResult): string {
  const s = r.summary;
  const med = (n: string) => s[n]?.median ?? NaN;
  const gap = med(STATUS("PostgreSQL")) - med(STATUS("file://"));
  const hits = (n: string) => {
    const xs = r.samples.filter((x) => x.variant === n);
    return xs.some((x) => x.readPulumi !== undefined)
      ? `${xs.filter((x) => x.readPulumi === false).length}/${xs.length}`
      : "—";
  };
  const row = (n: string, what: string) =>
    `| \`${n}\` | ${fmt(s[n] as Summary, 3)} | ${hits(n)} | ${what} |`;
  return [
    `The drift-probe stack \`${STACK}\` on file:// and on PostgreSQL (a server of the bench's own on the loopback), ${r.runs} interleaved rounds (order rotated each round); medians and min–max of the samples that exited 0 (for \`status\`: that were cache hits).`,
    "",
    "| variant | wall: median (min–max) | cache hits | what it is |",
    "|---|---|---|---|",
    row(FLOOR, "the floor of any Node.js CLI"),
    row(
      STATUS("file://"),
      "the CLI's start, outputs from the cache (key: the state file's signature)",
    ),
    row(STATUS("PostgreSQL"), "the same, key: the checkpoint row's `updated_at` (one psql)"),
    row(PSQL, "what the PostgreSQL key costs on its own"),
    row(UNCACHED("file://"), "the baseline: the read the cache saves"),
    row(UNCACHED("PostgreSQL"), "the same on PostgreSQL (what each start cost before)"),
    "",
    `\`status\` on PostgreSQL − on file://: ${ms(gap)} between the medians; per round ${ms(r.paired.median)} (${ms(r.paired.min)} to ${ms(r.paired.max)}, ${r.paired.n} rounds). Goal ≤ +200 ms: ${gap <= 0.2 ? "met" : "not met"}.`,
    `Without the cache each PostgreSQL start paid \`pulumi stack output\`: ${fmt(s[UNCACHED("PostgreSQL")] as Summary, 3)}; with it, \`status\` is ${(med(UNCACHED("PostgreSQL")) / med(STATUS("PostgreSQL"))).toFixed(1)}× faster than that read alone.`,
    "",
    ...tailMarkdown(r, 3),
  ].join("\n");
}
