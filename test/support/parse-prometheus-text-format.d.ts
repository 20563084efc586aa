// The types of parse-prometheus-text-format (it ships none): what the drift textfile's tests read.
declare module "parse-prometheus-text-format" {
  interface Sample {
    readonly labels?: Readonly<Record<string, string>>;
    readonly value: string;
  }
  interface MetricFamily {
    readonly name: string;
    readonly help: string;
    readonly type: "GAUGE" | "COUNTER" | "SUMMARY" | "HISTOGRAM" | "UNTYPED";
    readonly metrics: readonly Sample[];
  }
  function parsePrometheusTextFormat(text: string): MetricFamily[];
  export = parsePrometheusTextFormat;
}
