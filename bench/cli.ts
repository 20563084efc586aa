// Issue 25 goals 1 and 2, the CLI in the user's loop: how long `sparkform --help`, `status` and
// `run` take to start, and `sparkform run <node> -- true` against a fresh ssh to the same node.
// Every variant is interleaved sample by sample, the order rotated each round, against:
//   - node itself (`node -e 0`): the floor of any Node.js CLI;
//   - a fresh ssh to the node (`ssh -F <the stack's ssh_config> … true`, no ControlMaster to
//     reuse: sparkform's own master is per process, so each `run` connects afresh too);
//   - optionally the CLI of another checkout (--base DIR, e.g. the code before the change).
// `run (cold cache)` deletes the stack cache before each sample: what the first `run` after a
// `pulumi up` or a config change costs. `sparkform run -- true (PATH)` is the command exactly as
// a user types it after `npm run setup` (its launcher on PATH), when there is one (issue 32).
// One untimed run of each variant warms the OS caches.
import { spawnSync } from "node:child_process";
import {
  accessSync,
  constants,
  appendFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import * as path from "node:path";
import { readStack } from "../cli/stack";
import { repoRoot, stateDir } from "../setup/pulumi/env";
import { tailMarkdown } from "./lib/report";
import { fmt, load1, summarize, type Summary } from "./lib/stats";
import { rotation } from "./lib/rounds";

export const CLI_ITEMS = ["cli", "run", "sync"] as const;

interface Variant {
  readonly name: string;
  readonly item: (typeof CLI_ITEMS)[number] | "floor";
  readonly argv: readonly string[];
  readonly cwd: string;
  /** Before each sample (untimed). */
  readonly before?: () => void;
}

export interface CliSample {
  variant: string;
  round: number;
  seconds: number;
  /** This checkout's CLI read the stack through pulumi (its cache entry was rewritten). */
  readPulumi: boolean;
  /** CPU seconds (user + system) of the command and its children, when GNU time measured it. */
  cpu?: number;
  exitCode: number;
  load1: number;
}

export interface CliResult {
  stack: string;
  node: string;
  runs: number;
  base?: string;
  commands: Record<string, string>;
  samples: CliSample[];
  summary: Record<string, Summary>;
  failures: string[];
  /** `run -- true` under strace, with the cache warm and cold: each process it starts. */
  traces: Record<string, TraceRow[]>;
  /** Variants left out, and why (no `sparkform` on PATH). */
  skipped?: Record<string, string>;
  /** Where `sparkform` resolved on PATH, when it did. */
  onPath?: string;
}

/** The variant that runs `sparkform` as a user types it, through PATH. */
export const RUN_ON_PATH = "sparkform run -- true (PATH)";

/** The first executable `name` in the PATH's directories, as a shell finds it. */
export function onPath(name: string, pathVar = process.env.PATH ?? ""): string | undefined {
  for (const dir of pathVar.split(path.delimiter)) {
    const file = path.join(dir || ".", name);
    try {
      if (!statSync(file).isFile()) continue;
      accessSync(file, constants.X_OK);
      return file;
    } catch {
      // not here
    }
  }
  return undefined;
}

const shown = (argv: readonly string[]) =>
  argv.map((a) => (/^[\w@%+=:,./-]+$/.test(a) ? a : `'${a}'`)).join(" ");

/**
 * The stack cache's entries for `stack` as files (inode and mtime): a cache entry is rewritten
 * only when the CLI read the stack through pulumi (a stack that changed, e.g. by a `refresh`
 * someone else ran, or the cold variant).
 */
function cacheEntries(stack: string): string {
  return ["config", "outputs"]
    .map((k) => {
      try {
        const st = statSync(path.join(stateDir(), "cache", `${k}-${stack}.json`), { bigint: true });
        return `${st.ino}:${st.mtimeNs}`;
      } catch {
        return "-";
      }
    })
    .join(" ");
}

/** The variants of `items` on `stack`'s `node`, this checkout's CLI and optionally `base`'s. */
function variants(items: readonly string[], stack: string, node: string, base?: string): Variant[] {
  const cli = (dir: string, ...args: string[]) => [
    process.execPath,
    path.join(dir, "bin", "sparkform.js"),
    ...args,
  ];
  const clearCache = () => {
    const dir = path.join(stateDir(), "cache");
    if (!existsSync(dir)) return;
    for (const f of readdirSync(dir)) {
      if (f.endsWith(`-${stack}.json`)) rmSync(path.join(dir, f));
    }
  };
  const sshConfig = readStack(stack).config.sshConfigPath;
  const v: Variant[] = [
    { name: "node -e 0", item: "floor", argv: [process.execPath, "-e", "0"], cwd: repoRoot },
  ];
  if (items.includes("cli")) {
    v.push(
      { name: "--help", item: "cli", argv: cli(repoRoot, "--help"), cwd: repoRoot },
      { name: "npx --help", item: "cli", argv: ["npx", "sparkform", "--help"], cwd: repoRoot },
      // npm's own share of the line above: npx running a command that is not sparkform.
      { name: "npx node -e 0", item: "cli", argv: ["npx", "node", "-e", "0"], cwd: repoRoot },
      {
        name: "status",
        item: "cli",
        argv: cli(repoRoot, "status", "--stack", stack),
        cwd: repoRoot,
      },
      {
        name: "run --print",
        item: "cli",
        argv: cli(repoRoot, "run", node, "--stack", stack, "--print", "--", "true"),
        cwd: repoRoot,
      },
    );
    if (base) {
      v.push(
        { name: "base --help", item: "cli", argv: cli(base, "--help"), cwd: base },
        {
          name: "base status",
          item: "cli",
          argv: cli(base, "status", "--stack", stack),
          cwd: base,
        },
      );
    }
  }
  if (items.includes("run")) {
    v.push(
      {
        name: "ssh true",
        item: "run",
        argv: [
          "ssh",
          ...(sshConfig ? ["-F", sshConfig] : []),
          ...["-o", "ControlMaster=no", "-o", "ControlPath=none", node, "true"],
        ],
        cwd: repoRoot,
      },
      {
        name: "run -- true",
        item: "run",
        argv: cli(repoRoot, "run", node, "--stack", stack, "--", "true"),
        cwd: repoRoot,
      },
      {
        name: "run -- true (cold cache)",
        item: "run",
        argv: cli(repoRoot, "run", node, "--stack", stack, "--", "true"),
        cwd: repoRoot,
        before: clearCache,
      },
    );
    // As typed after setup: `sparkform` found through PATH (the launcher runs the checkout it is
    // started in, this one), no node path and no npx.
    if (onPath("sparkform")) {
      v.push({
        name: RUN_ON_PATH,
        item: "run",
        argv: ["sparkform", "run", node, "--stack", stack, "--", "true"],
        cwd: repoRoot,
      });
    }
    if (base) {
      v.push({
        name: "base run -- true",
        item: "run",
        argv: cli(base, "run", node, "--stack", stack, "--", "true"),
        cwd: base,
      });
    }
  }
  if (items.includes("sync")) v.push(...syncVariants(stack, base));
  return v;
}

/**
 * Issue 25 goal 3: `sparkform sync` of the stack's tree, warm and with one file edited before
 * each sample, against bench/sync-baseline.sh (rsync + a full sha256 of the copy on every node
 * at once) to a directory of its own beside the tree, with fresh ssh connections (as each
 * sparkform command makes its own) and with a master kept between runs.
 */
function syncVariants(stack: string, base?: string): Variant[] {
  const view = readStack(stack);
  const tree = view.config.tree;
  if (!tree) throw new Error(`stack ${stack} has no sparkform:tree to sync`);
  const edited = readdirSync(tree.source, { recursive: true, withFileTypes: true }).find(
    (e) => e.isFile() && e.name.endsWith(".cpp"),
  );
  if (!edited) throw new Error(`no .cpp file in ${tree.source} to edit`);
  const file = path.join(edited.parentPath, edited.name);
  syncEdits.set(file, syncEdits.get(file) ?? readFileSync(file));
  let n = 0;
  const edit = () => appendFileSync(file, `// bench edit ${++n}\n`);
  const baseline = (mode: string) => [
    "bash",
    path.join(repoRoot, "bench", "sync-baseline.sh"),
    view.config.sshConfigPath ?? "/dev/null",
    mode,
    tree.source,
    `${tree.dest.replace(/^~\/?/, "")}-bench-baseline`,
    ...view.config.nodes.map((x) => x.name),
    "--",
    // rsync filter rules as TreeSync writes them (components/tree/digest.ts rsyncExcludes; that
    // module loads the transport, which this tsx-run bench cannot require).
    ...tree.exclude.map((e) =>
      e.path !== undefined ? `/${e.path.replace(/\/+$/, "")}` : (e.name ?? ""),
    ),
  ];
  const sync = (dir: string) => [
    process.execPath,
    path.join(dir, "bin", "sparkform.js"),
    "sync",
    "--stack",
    stack,
  ];
  // Warm means nothing to carry: the edited variants share the source, so a warm variant first
  // runs once untimed (its own last run is then the state it finds).
  const warm = (v: Omit<Variant, "before">): Variant => ({ ...v, before: () => void once(v) });
  return [
    warm({ name: "sync", item: "sync", argv: sync(repoRoot), cwd: repoRoot }),
    {
      name: "sync (one file edited)",
      item: "sync",
      argv: sync(repoRoot),
      cwd: repoRoot,
      before: edit,
    },
    warm({
      name: "rsync + sha256 (fresh ssh)",
      item: "sync",
      argv: baseline("fresh"),
      cwd: repoRoot,
    }),
    {
      name: "rsync + sha256 (fresh ssh, one file edited)",
      item: "sync",
      argv: baseline("fresh"),
      cwd: repoRoot,
      before: edit,
    },
    warm({
      name: "rsync + sha256 (ssh master)",
      item: "sync",
      argv: baseline("master"),
      cwd: repoRoot,
    }),
    ...(base ? [warm({ name: "base sync", item: "sync", argv: sync(base), cwd: base })] : []),
  ];
}

/** Files the sync item edits, with their text before the bench: put back by `restoreSyncEdits`. */
const syncEdits = new Map<string, Buffer>();
function restoreSyncEdits(): void {
  for (const [f, text] of syncEdits) writeFileSync(f, text);
  syncEdits.clear();
}

/**
 * Run `v` once, under GNU time when there is one: its CPU seconds (user + system, the process
 * and all it waited for) hold still on a shared machine where wall time does not.
 */
function once(v: Variant): { exitCode: number; output: string; cpu?: number } {
  const timeFile = path.join(stateDir(), "bench", `cli-time-${process.pid}.txt`);
  const timed = existsSync("/usr/bin/time");
  if (timed) mkdirSync(path.dirname(timeFile), { recursive: true });
  const [cmd, ...args] = (
    timed ? ["/usr/bin/time", "-f", "%U %S", "-o", timeFile, ...v.argv] : v.argv
  ) as [string, ...string[]];
  const r = spawnSync(cmd, args, { cwd: v.cwd, encoding: "utf8", maxBuffer: 64 << 20 });
  let cpu: number | undefined;
  if (timed) {
    const [user, sys] =
      readFileSync(timeFile, "utf8").trim().split("\n").pop()?.split(" ").map(Number) ?? [];
    if (user !== undefined && sys !== undefined && !Number.isNaN(user + sys)) cpu = user + sys;
  }
  return {
    exitCode: r.status ?? 1,
    output: `${r.stdout ?? ""}${r.stderr ?? ""}`,
    ...(cpu !== undefined ? { cpu } : {}),
  };
}

/** The timed rounds: every variant once per round, the order rotated each round. */
function rounds(
  vs: readonly Variant[],
  opts: { stack: string; runs: number; log: (s: string) => void },
  samples: CliSample[],
  failures: string[],
): void {
  for (let round = 0; round < opts.runs; round++) {
    opts.log(`cli: round ${round + 1}/${opts.runs}`);
    for (const v of rotation(vs, round)) {
      v.before?.();
      const load = load1();
      const entries = cacheEntries(opts.stack);
      const t = process.hrtime.bigint();
      const r = once(v);
      const seconds = Number(process.hrtime.bigint() - t) / 1e9;
      const readPulumi = cacheEntries(opts.stack) !== entries;
      samples.push({
        variant: v.name,
        round,
        seconds,
        readPulumi,
        ...(r.cpu !== undefined ? { cpu: r.cpu } : {}),
        exitCode: r.exitCode,
        load1: load,
      });
      if (r.exitCode !== 0)
        failures.push(`${v.name} round ${round}: exit ${r.exitCode}\n${r.output.slice(-2000)}`);
    }
  }
}

/** Remove the baseline's own copies from the nodes (the bench made them). */
function cleanSyncBaseline(stack: string): void {
  const view = readStack(stack);
  const dest = `${(view.config.tree?.dest ?? "").replace(/^~\/?/, "")}-bench-baseline`;
  for (const n of view.config.nodes) {
    spawnSync("ssh", [
      ...(view.config.sshConfigPath ? ["-F", view.config.sshConfigPath] : []),
      n.name,
      `rm -rf -- '${dest}'`,
    ]);
  }
}

export function runCli(opts: {
  items: readonly string[];
  stack: string;
  node: string;
  runs: number;
  base?: string;
  log: (s: string) => void;
}): CliResult {
  const vs = variants(opts.items, opts.stack, opts.node, opts.base);
  const failures: string[] = [];
  opts.log(`cli: warming ${vs.length} variants`);
  for (const v of vs) {
    v.before?.();
    const r = once(v);
    if (r.exitCode !== 0)
      failures.push(`warm-up ${v.name}: exit ${r.exitCode}\n${r.output.slice(-2000)}`);
  }
  const samples: CliSample[] = [];
  try {
    rounds(vs, opts, samples, failures);
  } finally {
    restoreSyncEdits();
  }
  const traces: Record<string, TraceRow[]> = {};
  // The sync's trace also puts the restored tree back on the nodes (and in the state).
  for (const v of vs.filter((x) => x.name.startsWith("run -- true") || x.name === "sync")) {
    v.before?.();
    const rows = traceProcesses(v.argv, v.cwd);
    if (rows) traces[v.name] = rows;
    else if (v.name === "sync") once(v);
  }
  if (opts.items.includes("sync")) cleanSyncBaseline(opts.stack);
  const summary: Record<string, Summary> = {};
  for (const v of vs)
    summary[v.name] = summarize(samples.filter((s) => s.variant === v.name).map((s) => s.seconds));
  // A cached variant whose stack changed under it (someone's refresh) read through pulumi
  // once: its figure without those samples is what the cache gives, shown beside it.
  for (const v of vs) {
    const hit = samples.filter((s) => s.variant === v.name && !s.readPulumi).map((s) => s.seconds);
    const all = samples.filter((s) => s.variant === v.name);
    if (hit.length > 0 && hit.length < all.length && !v.name.includes("cold"))
      summary[`${v.name} (cache hits)`] = summarize(hit);
  }
  const launcher = onPath("sparkform");
  const skipped: Record<string, string> =
    opts.items.includes("run") && !launcher
      ? { [RUN_ON_PATH]: "no `sparkform` on PATH (`npm run setup` installs the launcher)" }
      : {};
  return {
    stack: opts.stack,
    node: opts.node,
    runs: opts.runs,
    ...(opts.base ? { base: opts.base } : {}),
    ...(launcher && opts.items.includes("run") ? { onPath: launcher } : {}),
    ...(Object.keys(skipped).length > 0 ? { skipped } : {}),
    commands: Object.fromEntries(
      vs.map((v) => [v.name, `(cd ${path.relative(repoRoot, v.cwd) || "."} && ${shown(v.argv)})`]),
    ),
    samples,
    summary,
    failures,
    traces,
  };
}

export interface TraceRow {
  /** The program and its first arguments (ssh's options left out). */
  readonly process: string;
  /** Milliseconds from the CLI's own exec to this process's exec, and how long it lived. */
  readonly startMs: number;
  readonly ms: number;
}

/**
 * One run of `argv` under `strace -f`: every process it executes, when it started and how long
 * it lived, against the CLI's own exec. strace slows each exec a little; read the shares.
 */
export function traceProcesses(argv: readonly string[], cwd: string): TraceRow[] | undefined {
  const file = path.join(stateDir(), "bench", `cli-trace-${process.pid}.txt`);
  mkdirSync(path.dirname(file), { recursive: true });
  const [cmd, ...args] = argv as [string, ...string[]];
  const r = spawnSync(
    "strace",
    ["-f", "-ttt", "-s", "64", "-e", "trace=execve", "-o", file, cmd, ...args],
    { cwd, encoding: "utf8" },
  );
  if (r.error || !existsSync(file)) return undefined;
  const started = new Map<string, { t: number; what: string }>();
  const pending = new Map<string, string>();
  const rows: TraceRow[] = [];
  let t0: number | undefined;
  for (const line of readFileSync(file, "utf8").split("\n")) {
    const m = /^(\d+)\s+(\d+\.\d+) (.*)$/.exec(line);
    if (!m) continue;
    const [, pid, at, rest] = m as unknown as [string, string, string, string];
    const t = Number(at);
    // A call another process interrupted is printed in two parts: "execve(… <unfinished ...>"
    // then "<... execve resumed>) = 0"; keep the first part until the second says how it ended.
    const call = rest.endsWith("<unfinished ...>")
      ? (pending.set(pid, rest), undefined)
      : rest.startsWith("<... execve resumed>")
        ? `${pending.get(pid) ?? ""}${rest.slice("<... execve resumed>".length)}`
        : rest;
    if (call === undefined) continue;
    const exec = /^execve\("[^"]*", \[(.*?)\]/.exec(call);
    if (exec && /= 0$/.test(call)) {
      const words = [...(exec[1] as string).matchAll(/"((?:[^"\\]|\\.)*)"/g)].map(
        (w) => w[1] as string,
      );
      // ssh's -o/-F/-i options say nothing about the step: keep the program, its mode
      // (-G, -O exit) and the remote command's first word.
      const shownWords =
        words[0] === "ssh"
          ? [
              "ssh",
              ...words.filter((w) => w === "-G" || w === "-O"),
              words.at(-1)?.slice(0, 40) ?? "",
            ]
          : words.slice(0, 3);
      t0 ??= t;
      started.set(pid, { t, what: shownWords.join(" ") });
    } else if (rest.startsWith("+++ exited") || rest.startsWith("+++ killed")) {
      const s = started.get(pid);
      pending.delete(pid);
      if (s && t0 !== undefined)
        rows.push({ process: s.what, startMs: (s.t - t0) * 1000, ms: (t - s.t) * 1000 });
      started.delete(pid);
    }
  }
  rmSync(file, { force: true });
  return rows.sort((a, b) => a.startMs - b.startMs);
}

/** The sync rows: each sync against twice its baseline (goal 3), fresh ssh and ssh master. */
function syncRows(
  s: Record<string, Summary>,
  row: (name: string, goal: string, met?: boolean) => string | undefined,
): (string | undefined)[] {
  const twice = (name: string, baseline: string) => {
    const b = s[baseline]?.median;
    const m = s[name]?.median;
    if (b === undefined || m === undefined) return undefined;
    return row(
      name,
      `≤ 2 × \`${baseline}\` = ${(2 * b).toFixed(3)} s (here ${(m / b).toFixed(2)}×)`,
      m <= 2 * b,
    );
  };
  return [
    row("rsync + sha256 (fresh ssh)", "the baseline"),
    row("rsync + sha256 (fresh ssh, one file edited)", "the baseline, one file edited"),
    row("rsync + sha256 (ssh master)", "the baseline, warm ssh master"),
    twice("sync", "rsync + sha256 (fresh ssh)"),
    twice("sync (one file edited)", "rsync + sha256 (fresh ssh, one file edited)"),
    s["sync"] && s["rsync + sha256 (ssh master)"]
      ? `| (the same \`sync\`) | | | against the warm ssh master: ${((s["sync"] as Summary).median / (s["rsync + sha256 (ssh master)"] as Summary).median).toFixed(2)}× | — |`
      : undefined,
    row("base sync", "before"),
  ];
}

export function cliMarkdown(r: CliResult): string {
  const s = r.summary;
  const cpu = (name: string) => {
    const base = name.replace(/ \(cache hits\)$/, "");
    const xs = r.samples
      .filter((x) => x.variant === base && (base === name || !x.readPulumi))
      .map((x) => x.cpu)
      .filter((x): x is number => x !== undefined);
    return xs.length > 0 ? `${summarize(xs).median.toFixed(2)} s` : "—";
  };
  const row = (name: string, goal: string, met?: boolean) =>
    s[name]
      ? `| \`${name}\` | ${fmt(s[name] as Summary, 3)} | ${cpu(name)} | ${goal} | ${met === undefined ? "—" : met ? "yes" : "no"} |`
      : undefined;
  const start = (name: string) => row(name, "≤ 0.5 s", (s[name]?.median ?? Infinity) <= 0.5);
  const ssh = s["ssh true"]?.median;
  const runGap = (name: string) =>
    s[name] && ssh !== undefined
      ? row(
          name,
          `≤ ssh + 0.8 s = ${(ssh + 0.8).toFixed(3)} s (here ssh + ${((s[name] as Summary).median - ssh).toFixed(3)} s)`,
          (s[name] as Summary).median <= ssh + 0.8,
        )
      : undefined;
  const lines = [
    `Stack \`${r.stack}\`, node \`${r.node}\`, ${r.runs} interleaved rounds (order rotated each round); medians and min–max.`,
    "",
    "| variant | wall: median (min–max) | CPU: median | goal (wall) | met |",
    "|---|---|---|---|---|",
    row("node -e 0", "the floor"),
    start("--help"),
    start("npx --help"),
    row("npx node -e 0", "npx's floor"),
    start("status"),
    start("status (cache hits)"),
    start("run --print"),
    start("run --print (cache hits)"),
    row("base --help", "before"),
    row("base status", "before"),
    row("ssh true", "the baseline"),
    runGap("run -- true"),
    runGap("run -- true (cache hits)"),
    runGap("run -- true (cold cache)"),
    runGap(RUN_ON_PATH),
    runGap(`${RUN_ON_PATH} (cache hits)`),
    runGap("base run -- true"),
    ...syncRows(s, row),
  ].filter((l): l is string => l !== undefined);
  const traced = Object.entries(r.traces).flatMap(([name, rows]) => [
    `\`${name}\` under \`strace -f\` (one run after the rounds; every process it started, from the CLI's own exec):`,
    "",
    "| process | starts at | lives |",
    "|---|---:|---:|",
    ...rows.map(
      (x) =>
        `| \`${x.process.replace(/\|/g, "\\|")}\` | ${x.startMs.toFixed(0)} ms | ${x.ms.toFixed(0)} ms |`,
    ),
    "",
  ]);
  const misses = [...new Set(r.samples.map((x) => x.variant))]
    .filter((n) => !n.includes("cold") && !n.startsWith("base"))
    .map((n) => {
      const rounds = r.samples
        .filter((x) => x.variant === n && x.readPulumi)
        .map((x) => x.round + 1);
      return rounds.length > 0 ? `\`${n}\` in rounds ${rounds.join(", ")}` : undefined;
    })
    .filter((m): m is string => m !== undefined);
  const pathNotes = [
    ...(r.onPath ? [`\`${RUN_ON_PATH}\`: \`sparkform\` on PATH is \`${r.onPath}\`.`] : []),
    ...Object.entries(r.skipped ?? {}).map(([name, why]) => `\`${name}\` not run: ${why}.`),
  ];
  return [
    ...lines,
    "",
    ...(pathNotes.length > 0 ? [...pathNotes, ""] : []),
    ...(misses.length > 0
      ? [
          "Samples that read the stack through pulumi (the stack's state or config changed under " +
            `the bench, e.g. someone's \`refresh\`, so the cache entry was rewritten): ${misses.join("; ")}.`,
          "",
        ]
      : []),
    ...traced,
    ...tailMarkdown({ ...r, variants: [...new Set(r.samples.map((x) => x.variant))] }, 3),
  ].join("\n");
}
