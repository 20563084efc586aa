// The metric and alert names of issue 35 (test/support/monitoring-contract.ts) as monitoring/
// uses them: the rules' group and alerts with runbook annotations, a promtool test for every
// alert firing and not firing, the dashboard's queries over nothing but the contract's names
// and the serving metrics, and both READMEs listing every name. The real promtool and
// Prometheus run them in test/integration/monitoring.test.ts.
import { readFileSync } from "node:fs";
import * as path from "node:path";
import parsePrometheusTextFormat from "parse-prometheus-text-format";
import { describe, expect, it } from "vitest";
import { parse } from "yaml";
import {
  ALERT_GROUP,
  CONTRACT_ALERTS,
  CONTRACT_METRICS,
  SERVING_METRICS,
  driftTextfile,
} from "../support/monitoring-contract";

const repo = path.join(__dirname, "..", "..");
const read = (file: string) => readFileSync(path.join(repo, file), "utf8");

interface Rule {
  alert: string;
  expr: string;
  for?: string;
  annotations: Record<string, string>;
}
interface AlertTest {
  alertname: string;
  exp_alerts: unknown[];
}
interface Panel {
  type: string;
  title: string;
  targets?: { expr: string }[];
}

const rules = parse(read("monitoring/rules/sparkform.rules.yml")) as {
  groups: { name: string; rules: Rule[] }[];
};
const ruleTests = parse(read("monitoring/rules/sparkform.rules.test.yml")) as {
  rule_files: string[];
  tests: { alert_rule_test: AlertTest[] }[];
};
const dashboard = JSON.parse(read("monitoring/dashboards/sparkform.json")) as {
  panels: Panel[];
  templating: { list: { name: string; definition?: string }[] };
};
const dashboardExprs = dashboard.panels.flatMap((p) => (p.targets ?? []).map((t) => t.expr));
const metricNames = CONTRACT_METRICS.map((m) => m.name);
const alertNames = Object.keys(CONTRACT_ALERTS);
/** Every name in a PromQL text that is one of ours or a serving metric's family. */
const namesIn = (expr: string) =>
  expr.match(/\b(?:sparkform_[a-z_]+|llamacpp:[a-z_:]+|caddy_[a-z_]+)\b/g) ?? [];

describe("monitoring/rules/sparkform.rules.yml", () => {
  const group = rules.groups.find((g) => g.name === ALERT_GROUP);

  it("has one group, sparkform, with exactly the contract's alerts and their for:", () => {
    expect(rules.groups.map((g) => g.name)).toEqual([ALERT_GROUP]);
    expect(Object.fromEntries((group?.rules ?? []).map((r) => [r.alert, r.for]))).toEqual(
      CONTRACT_ALERTS,
    );
  });

  it.each(alertNames)("%s: reads like a runbook (what, why it matters, what to do)", (name) => {
    const rule = group?.rules.find((r) => r.alert === name);
    expect(rule?.annotations.summary).toMatch(/\S/);
    expect(rule?.annotations.description).toMatch(/What:[\s\S]*Why it matters:[\s\S]*What to do:/);
  });

  it("asks only for the contract's names and the serving metrics", () => {
    const used = (group?.rules ?? []).flatMap((r) => namesIn(r.expr));
    expect(used.filter((n) => !metricNames.includes(n) && !SERVING_METRICS.includes(n))).toEqual(
      [],
    );
  });

  it("says the stale threshold is three 5-minute intervals, a lock is not a failing check, and the down unit's role", () => {
    const rule = (name: string) => group?.rules.find((r) => r.alert === name);
    expect(rule("SparkformDriftCheckStale")?.expr).toMatch(/> 900$/);
    expect(rule("SparkformDriftCheckFailing")?.expr).toContain('reason="locked"');
    expect(rule("SparkformUnitDown")?.annotations.summary).toContain("{{ $labels.role }}");
  });
});

describe("monitoring/rules/sparkform.rules.test.yml", () => {
  const checks = ruleTests.tests.flatMap((t) => t.alert_rule_test);

  it("tests the shipped rules", () => {
    expect(ruleTests.rule_files).toEqual(["sparkform.rules.yml"]);
  });

  it.each(alertNames)("%s: is tested firing and not firing", (name) => {
    const mine = checks.filter((c) => c.alertname === name);
    expect(mine.some((c) => c.exp_alerts.length > 0)).toBe(true);
    expect(mine.some((c) => c.exp_alerts.length === 0)).toBe(true);
  });
});

describe("monitoring/dashboards/sparkform.json", () => {
  it("queries every contract metric, and no other name of ours or the servers'", () => {
    const used = new Set(dashboardExprs.flatMap(namesIn));
    expect(metricNames.filter((n) => !used.has(n))).toEqual([]);
    expect(
      [...used].filter((n) => !metricNames.includes(n) && !SERVING_METRICS.includes(n)),
    ).toEqual([]);
  });

  it("has a query on every panel but its rows, and a stack variable over a contract metric", () => {
    const bare = dashboard.panels.filter((p) => p.type !== "row" && !p.targets?.length);
    expect(bare.map((p) => p.title)).toEqual([]);
    const stack = dashboard.templating.list.find((v) => v.name === "stack");
    expect(namesIn(stack?.definition ?? "").every((n) => metricNames.includes(n))).toBe(true);
    expect(namesIn(stack?.definition ?? "")).toHaveLength(1);
  });
});

describe("the metric contract", () => {
  it("is what the test textfile carries, each name once with its type and labels", async () => {
    const families = parsePrometheusTextFormat(await driftTextfile("local", 1_800_000_000));
    expect(families.map((f) => [f.name, f.type.toLowerCase()])).toEqual(
      CONTRACT_METRICS.map((m) => [m.name, m.type]),
    );
    for (const m of CONTRACT_METRICS) {
      const family = families.find((f) => f.name === m.name);
      for (const sample of family?.metrics ?? []) {
        expect(Object.keys(sample.labels ?? {}).sort()).toEqual([...m.labels].sort());
      }
    }
  });

  it.each([["monitoring/README.md"], ["README.md"]])(
    "%s lists every metric and alert name",
    (file) => {
      const text = read(file);
      expect([...metricNames, ...alertNames].filter((n) => !text.includes(`\`${n}\``))).toEqual([]);
    },
  );
});
