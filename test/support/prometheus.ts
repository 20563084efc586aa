// The real Prometheus and prometheus-node-exporter, started by a test on free loopback ports
// and stopped after it: node_exporter serves the textfiles of one directory (what `sparkform
// drift --metrics-dir` writes), Prometheus scrapes it every second and evaluates the shipped
// rules with every `for:` cut short (the expressions, labels and annotations are the shipped
// ones; only the wait is the test's). Used by the monitoring integration test and the journey,
// which adds scrape jobs of its own (the servers' metrics through the router).
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as path from "node:path";
import { parse, stringify } from "yaml";
import { freePort } from "../../sim/world/free-port";

export { freePort };

const repo = path.join(__dirname, "..", "..");
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const have = (bin: string) => spawnSync("sh", ["-c", `command -v ${bin}`]).status === 0;

/** Whether this machine has the parts (`npm run setup` installs Debian's as root). */
export const havePrometheus = () =>
  ["promtool", "prometheus", "prometheus-node-exporter"].every(have);

/** A daemon of the test's own, its output kept for the failure message. */
class Daemon {
  readonly child: ChildProcess;
  output = "";
  constructor(bin: string, args: string[]) {
    this.child = spawn(bin, args, { stdio: ["ignore", "pipe", "pipe"] });
    const keep = (d: Buffer) => (this.output = (this.output + d.toString()).slice(-4000));
    this.child.stdout?.on("data", keep);
    this.child.stderr?.on("data", keep);
  }
  async stop(): Promise<void> {
    if (this.child.exitCode !== null || this.child.signalCode !== null) return;
    const exited = new Promise((r) => this.child.once("exit", r));
    this.child.kill("SIGTERM");
    await Promise.race([exited, sleep(10_000)]);
    if (this.child.exitCode === null && this.child.signalCode === null) this.child.kill("SIGKILL");
  }
}

export interface ApiAnswer<T> {
  status: string;
  error?: string;
  data: T;
}

export interface Alert {
  labels: Record<string, string>;
  state: string;
}

export interface Monitoring {
  /** http://127.0.0.1:PORT/api/v1 */
  readonly api: string;
  query<T>(endpoint: string, params?: Record<string, string>): Promise<ApiAnswer<T>>;
  /** Prometheus's own /api/v1/alerts. */
  alerts(): Promise<Alert[]>;
  /** Both daemons' last output, for a failure message. */
  logs(): string;
  stop(): Promise<void>;
}

/** One more target for the test's Prometheus, beside node_exporter. */
export interface ScrapeTarget {
  /** Targets of one jobName are one job (Prometheus refuses a job name twice). */
  jobName: string;
  /** `host:port`, scraped over plain HTTP. */
  target: string;
  /** Default `/metrics`; per target (`__metrics_path__`), so one job can scrape several paths. */
  metricsPath?: string;
  /** A file holding the bearer token (`authorization.credentials_file`); one per job. */
  keyFile?: string;
  labels?: Record<string, string>;
}

const CONTROL_JOB = "sparkform-control";

/** The scrape_configs of `targets`, grouped by job name, after the control host's job. */
export function scrapeConfigs(
  exporter: string,
  targets: readonly ScrapeTarget[] = [],
): Record<string, unknown>[] {
  const jobs = new Map<string, ScrapeTarget[]>();
  for (const t of targets) {
    if (t.jobName === CONTROL_JOB)
      throw new Error(
        `startMonitoring scrape: job name ${CONTROL_JOB} is node_exporter's (the textfile the ` +
          "rules read); give this target another jobName",
      );
    jobs.set(t.jobName, [...(jobs.get(t.jobName) ?? []), t]);
  }
  return [
    { job_name: CONTROL_JOB, static_configs: [{ targets: [exporter] }] },
    ...[...jobs].map(([name, ts]) => {
      const keys = [...new Set(ts.map((t) => t.keyFile))];
      if (keys.length > 1)
        throw new Error(
          `startMonitoring scrape job ${name}: its targets name different key files ` +
            `(${keys.map(String).join(", ")}), and a job sends one; give each key its own jobName`,
        );
      const keyFile = keys[0];
      return {
        job_name: name,
        ...(keyFile === undefined ? {} : { authorization: { credentials_file: keyFile } }),
        static_configs: ts.map((t) => ({
          targets: [t.target],
          labels: {
            ...t.labels,
            ...(t.metricsPath === undefined ? {} : { __metrics_path__: t.metricsPath }),
          },
        })),
      };
    }),
  ];
}

/**
 * node_exporter on `textfiles` and Prometheus scraping it every second with the shipped rules,
 * each `for:` cut to `ruleFor`; working files under `dir`. `scrape`: more targets, scraped every
 * second too.
 */
export async function startMonitoring(o: {
  textfiles: string;
  dir: string;
  ruleFor?: string;
  scrape?: readonly ScrapeTarget[];
}): Promise<Monitoring> {
  mkdirSync(path.join(o.dir, "data"), { recursive: true });
  const exporterPort = await freePort();
  // Before either daemon starts: a refused target leaves nothing running.
  const jobs = scrapeConfigs(`127.0.0.1:${exporterPort}`, o.scrape);
  const exporter = new Daemon("prometheus-node-exporter", [
    `--web.listen-address=127.0.0.1:${exporterPort}`,
    "--collector.disable-defaults",
    "--collector.textfile",
    `--collector.textfile.directory=${o.textfiles}`,
  ]);
  const rules = parse(
    readFileSync(path.join(repo, "monitoring/rules/sparkform.rules.yml"), "utf8"),
  ) as { groups: { rules: { for?: string }[] }[] };
  for (const rule of rules.groups.flatMap((g) => g.rules))
    if (rule.for) rule.for = o.ruleFor ?? "2s";
  writeFileSync(path.join(o.dir, "rules.yml"), stringify(rules));
  writeFileSync(
    path.join(o.dir, "prometheus.yml"),
    stringify({
      global: { scrape_interval: "1s", evaluation_interval: "1s" },
      rule_files: ["rules.yml"],
      scrape_configs: jobs,
    }),
  );
  const port = await freePort();
  const api = `http://127.0.0.1:${port}/api/v1`;
  const prometheus = new Daemon("prometheus", [
    `--config.file=${path.join(o.dir, "prometheus.yml")}`,
    `--storage.tsdb.path=${path.join(o.dir, "data")}`,
    `--web.listen-address=127.0.0.1:${port}`,
  ]);
  const query = async <T>(endpoint: string, params: Record<string, string> = {}) => {
    const res = await fetch(`${api}${endpoint}?${new URLSearchParams(params).toString()}`);
    return (await res.json()) as ApiAnswer<T>;
  };
  return {
    api,
    query,
    alerts: async () => (await query<{ alerts: Alert[] }>("/alerts")).data.alerts,
    logs: () => `node_exporter:\n${exporter.output}\nprometheus:\n${prometheus.output}`,
    stop: async () => {
      await prometheus.stop();
      await exporter.stop();
    },
  };
}
