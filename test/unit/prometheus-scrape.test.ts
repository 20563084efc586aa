// startMonitoring's extra scrape targets (test/support/prometheus.ts): the scrape_configs the
// test's Prometheus gets, as Prometheus reads them (a job name once; `__metrics_path__` as a
// target's label sets its path; one authorization per job).
import { describe, expect, it } from "vitest";
import { scrapeConfigs } from "../support/prometheus";

const node = (n: string) => ({
  jobName: "llama-server",
  target: "127.0.0.1:18090",
  metricsPath: `/servers/${n}/metrics`,
  keyFile: "/tmp/k/sparkform-api-key",
  labels: { node: n },
});

describe("scrapeConfigs", () => {
  it("is node_exporter's job alone without targets (the callers before the option)", () => {
    expect(scrapeConfigs("127.0.0.1:9100")).toEqual([
      { job_name: "sparkform-control", static_configs: [{ targets: ["127.0.0.1:9100"] }] },
    ]);
  });

  it("makes one job of a job name's targets, each with its own path, the key file its bearer", () => {
    const [, job, ...rest] = scrapeConfigs("127.0.0.1:9100", [node("spark-1"), node("spark-2")]);
    expect(rest).toEqual([]);
    expect(job).toEqual({
      job_name: "llama-server",
      authorization: { credentials_file: "/tmp/k/sparkform-api-key" },
      static_configs: [
        {
          targets: ["127.0.0.1:18090"],
          labels: { node: "spark-1", __metrics_path__: "/servers/spark-1/metrics" },
        },
        {
          targets: ["127.0.0.1:18090"],
          labels: { node: "spark-2", __metrics_path__: "/servers/spark-2/metrics" },
        },
      ],
    });
  });

  it("leaves the path and the authorization out when not given", () => {
    const [, job] = scrapeConfigs("127.0.0.1:9100", [{ jobName: "router", target: "h:1" }]);
    expect(job).toEqual({ job_name: "router", static_configs: [{ targets: ["h:1"], labels: {} }] });
  });

  it("refuses node_exporter's job name, and one job with two key files", () => {
    expect(() =>
      scrapeConfigs("127.0.0.1:9100", [{ jobName: "sparkform-control", target: "h:1" }]),
    ).toThrow(/another jobName/);
    expect(() =>
      scrapeConfigs("127.0.0.1:9100", [node("spark-1"), { ...node("spark-2"), keyFile: "/b" }]),
    ).toThrow(/its own jobName/);
  });
});
