// monitoring/ against the real parts (issue 35 item 5): Debian's promtool checks the shipped
// config, rules and rule tests; then the real prometheus-node-exporter serves a textfile in the
// drift check's format (test/support/monitoring-contract.ts: every contract name, one RpcWorker
// drifted) and the real Prometheus scrapes it every second with the shipped rules. Every query
// of the dashboard must evaluate through /api/v1/query with data (stand-ins for llama-server's
// and Caddy's series beside the textfile), and SparkformDriftPresent must reach
// Prometheus's own /api/v1/alerts. Both listen on free loopback ports and are stopped after.
import { spawnSync } from "node:child_process";
import {
  cpSync,
  mkdirSync,
  mkdtempSync,
  readFileSync,
  renameSync,
  rmSync,
  writeFileSync,
} from "node:fs";
import * as os from "node:os";
import * as path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import { parse } from "yaml";
import { CONTRACT_METRICS, driftTextfile, textfileName } from "../support/monitoring-contract";
import { havePrometheus, type Monitoring, sleep, startMonitoring } from "../support/prometheus";
import { requireOrSkip } from "../support/requires";

const repo = path.join(__dirname, "..", "..");
const STACK = "local";

/** The README's promtool commands, run as it shows them from the repository root. */
const PROMTOOL_COMMANDS = [
  "promtool check config --syntax-only monitoring/prometheus.yml",
  "promtool check rules monitoring/rules/sparkform.rules.yml",
  "promtool test rules monitoring/rules/sparkform.rules.test.yml",
];

const SERVING_STAND_INS = [
  "llamacpp:requests_processing 1",
  "llamacpp:requests_deferred 0",
  "llamacpp:prompt_tokens_total 120",
  "llamacpp:tokens_predicted_total 64",
  "llamacpp:tokens_predicted_seconds_total 2.5",
  'caddy_reverse_proxy_upstreams_healthy{upstream="127.0.0.1:8080"} 1',
  "",
].join("\n");

describe.skipIf(
  requireOrSkip(
    "promtool, prometheus and prometheus-node-exporter",
    havePrometheus(),
    "monitoring/ is checked by the real Prometheus (npm run setup installs Debian's as root)",
  ),
)("monitoring/ with the real Prometheus", () => {
  it.each(PROMTOOL_COMMANDS)("%s", (command) => {
    const [bin, ...args] = command.split(" ");
    const run = spawnSync(bin as string, args, { cwd: repo, encoding: "utf8" });
    expect(run.status, `${command}:\n${run.stdout}${run.stderr}`).toBe(0);
  });

  it("promtool check config: the shipped config with its rules and a key file beside it, as a user installs them", () => {
    // The full check stats every credentials_file, and the key is the user's to write: a copy
    // of monitoring/ with a stand-in key where the config names it.
    const dir = mkdtempSync(path.join(os.tmpdir(), "sf-monitoring-config-"));
    try {
      cpSync(path.join(repo, "monitoring"), dir, { recursive: true });
      const config = parse(readFileSync(path.join(dir, "prometheus.yml"), "utf8")) as {
        scrape_configs: { job_name: string; authorization?: { credentials_file?: string } }[];
      };
      const keyFiles = new Set(
        config.scrape_configs.flatMap((c) => c.authorization?.credentials_file ?? []),
      );
      expect([...keyFiles]).toEqual(["sparkform-api-key"]);
      for (const f of keyFiles) writeFileSync(path.join(dir, f), "sk-stand-in\n", { mode: 0o600 });
      const run = spawnSync("promtool", ["check", "config", "prometheus.yml"], {
        cwd: dir,
        encoding: "utf8",
      });
      expect(run.status, `${run.stdout}${run.stderr}`).toBe(0);
      expect(run.stdout).toMatch(/SUCCESS: 1 rule files found/);
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });

  describe("node_exporter's textfile scraped by Prometheus with the rules", () => {
    let dir = "";
    let mon: Monitoring | undefined;
    const query = <T>(endpoint: string, params: Record<string, string> = {}) =>
      (mon as Monitoring).query<T>(endpoint, params);
    const logs = () => mon?.logs() ?? "";

    beforeAll(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), "sf-monitoring-"));
      const textfiles = path.join(dir, "textfile");
      mkdirSync(textfiles);
      // As `sparkform drift` writes it: a temp name in the same directory, then a rename.
      const tmp = path.join(textfiles, `.${textfileName(STACK)}.tmp`);
      writeFileSync(tmp, await driftTextfile(STACK, Math.floor(Date.now() / 1000)));
      renameSync(tmp, path.join(textfiles, textfileName(STACK)));
      // Stand-ins for llama-server's and the router's series (they are scraped from the nodes,
      // not from a textfile, in a real setup), so that the dashboard's serving queries have
      // data too: one healthy upstream, nothing deferred.
      writeFileSync(path.join(textfiles, "serving.prom"), SERVING_STAND_INS);
      // The shipped rules with every `for:` cut to 2 s (support/prometheus.ts): the alert must
      // go pending then firing within the test, not after 10 minutes.
      mon = await startMonitoring({ textfiles, dir, ruleFor: "2s" });

      // Ready once every contract name has been scraped, twice (increase() on the counter
      // needs two samples).
      const names = `count by (__name__) ({__name__=~"sparkform_.+",stack="${STACK}"})`;
      const twice = `count_over_time(sparkform_repairs_total{stack="${STACK}"}[1m]) >= 2`;
      const deadline = Date.now() + 60_000;
      for (;;) {
        const answers = await Promise.all(
          [names, twice].map((q) => query<{ result: unknown[] }>("/query", { query: q })),
        ).catch(() => []);
        const [seen, again] = answers.map((a) => (a.status === "success" ? a.data.result : []));
        if (seen?.length === CONTRACT_METRICS.length && again?.length) break;
        if (Date.now() > deadline) {
          throw new Error(
            `Prometheus did not scrape node_exporter's textfile within 60 s; the tests below need it. Their output:\n${logs()}`,
          );
        }
        await sleep(500);
      }
    });

    afterAll(async () => {
      await mon?.stop();
      if (dir) rmSync(dir, { recursive: true, force: true });
    });

    it("SparkformDriftPresent reaches firing in /api/v1/alerts for the drifted kind; no check or unit alert fires", async () => {
      type Alert = { labels: Record<string, string>; state: string };
      let alerts: Alert[] = [];
      const deadline = Date.now() + 60_000;
      while (Date.now() < deadline) {
        const answer = await query<{ alerts: Alert[] }>("/alerts");
        expect(answer.status).toBe("success");
        alerts = answer.data.alerts;
        if (
          alerts.some((a) => a.labels.alertname === "SparkformDriftPresent" && a.state === "firing")
        )
          break;
        await sleep(500);
      }
      expect(
        alerts.map((a) => [a.labels.alertname, a.labels.stack, a.labels.kind, a.state]),
        logs(),
      ).toEqual([["SparkformDriftPresent", STACK, "RpcWorker", "firing"]]);
    });

    const dashboard = JSON.parse(
      readFileSync(path.join(repo, "monitoring/dashboards/sparkform.json"), "utf8"),
    ) as { panels: { title: string; targets?: { expr: string }[] }[] };
    const queries = dashboard.panels.flatMap((p) =>
      (p.targets ?? []).map((t) => [p.title, t.expr] as const),
    );

    it.each(queries)("dashboard %s: %s evaluates", async (_title, expr) => {
      // Grafana's $stack variable, chosen as the one stack here.
      const answer = await query<{ result: unknown[] }>("/query", {
        query: expr.replaceAll("$stack", STACK),
      });
      expect(answer.status, answer.error).toBe("success");
      // Every one has data in the textfiles (ALERTS from the test above).
      expect(answer.data.result.length, `${expr} is empty`).toBeGreaterThan(0);
    });
  });
});
