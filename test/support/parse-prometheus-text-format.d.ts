// The package ships no types; this is the shape its README documents (prom2json's).
declare module "parse-prometheus-text-format" {
  interface Sample {
    value?: string;
    labels?: Record<string, string>;
  }
  interface Family {
    name: string;
    help: string;
    type: "GAUGE" | "COUNTER" | "SUMMARY" | "HISTOGRAM" | "UNTYPED";
    metrics: Sample[];
  }
  export default function parsePrometheusTextFormat(text: string): Family[];
}
