// The real Prometheus and prometheus-node-exporter, started by a test on free loopback ports
// and stopped after it: node_exporter serves the textfiles of one directory (what `sparkform
// drift --metrics-dir` writes), Prometheus scrapes it every second and evaluates the shipped
// rules with every `for:` cut short (the expressions, labels and annotations are the shipped
// ones; only the wait is the test's). Used by the monitoring integration test and the journey.
import { type ChildProcess, spawn, spawnSync } from "node:child_process";
import { mkdirSync, readFileSync, writeFileSync } from "node:fs";
import * as net from "node:net";
import * as path from "node:path";
import { parse, stringify } from "yaml";

const repo = path.join(__dirname, "..", "..");
export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const have = (bin: string) => spawnSync("sh", ["-c", `command -v ${bin}`]).status === 0;

/** Whether this machine has the parts (`npm run setup` installs Debian's as root). */
export const havePrometheus = () =>
  ["promtool", "prometheus", "prometheus-node-exporter"].every(have);

export async function freePort(): Promise<number> {
  const server = net.createServer();
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address() as net.AddressInfo;
  await new Promise((resolve) => server.close(resolve));
  return port;
}

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

/**
 * node_exporter on `textfiles` and Prometheus scraping it every second with the shipped rules,
 * each `for:` cut to `ruleFor`; working files under `dir`.
 */
export async function startMonitoring(o: {
  textfiles: string;
  dir: string;
  ruleFor?: string;
}): Promise<Monitoring> {
  mkdirSync(path.join(o.dir, "data"), { recursive: true });
  const exporterPort = await freePort();
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
      scrape_configs: [
        {
          job_name: "sparkform-control",
          static_configs: [{ targets: [`127.0.0.1:${exporterPort}`] }],
        },
      ],
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
