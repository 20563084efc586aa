// One error type for the stack configuration and one function that turns zod issues into
// its lines, `sparkform:<key.path>: what is wrong; the fix`, so every section (nodes, tree,
// build, model, …) reports the same way and all problems come out together.
import type { z } from "zod";

/** Where each line of a ConfigError tells the user to make the fix. */
export const CONFIG_FIX_HINT =
  "Fix it in stacks/Pulumi.<stack>.yaml or with `pulumi config set --path sparkform:<key> <value>`.";

/** A user error in the `sparkform:` stack configuration; `lines` has one line per problem. */
export class ConfigError extends Error {
  override name = "ConfigError";
  readonly lines: readonly string[];
  constructor(message: string, lines: readonly string[] = []) {
    super(message);
    this.lines = lines;
  }
}

/** The ConfigError for these problem lines (each `sparkform:<key>: …`). */
export function configError(lines: readonly string[]): ConfigError {
  return new ConfigError(
    `invalid stack configuration:\n${lines.map((l) => `  ${l}`).join("\n")}\n${CONFIG_FIX_HINT}`,
    lines,
  );
}

/** `sparkform:` + a key path: `["nodes", 0, "host"]` → `sparkform:nodes[0].host`. */
export function configKeyPath(path: readonly PropertyKey[]): string {
  const [key, ...rest] = path;
  return `sparkform:${String(key ?? "")}${rest.map((p) => (typeof p === "number" ? `[${p}]` : `.${String(p)}`)).join("")}`;
}

/**
 * One line per zod issue, `sparkform:<prefix + issue path>: <message>`. `prefix` is the key
 * the parsed value came from (e.g. `["build"]`) when a section is parsed on its own.
 */
export function configIssueLines(
  issues: readonly z.core.$ZodIssue[],
  prefix: readonly PropertyKey[] = [],
): string[] {
  return issues.flatMap((i) =>
    // A record key that its key schema refused: that schema's own words, at the key.
    i.code === "invalid_key"
      ? configIssueLines(i.issues, [...prefix, ...i.path])
      : [`${configKeyPath([...prefix, ...i.path])}: ${i.message}`],
  );
}

/** A value as a message may quote it: short, on one line (JSON escapes control characters). */
export function shown(v: unknown): string {
  if (typeof v === "string") {
    const s = JSON.stringify(v);
    return s.length > 62 ? `${s.slice(0, 60)}…"` : s;
  }
  if (Array.isArray(v)) return "a list";
  if (v === null) return "null";
  if (typeof v === "object") return "a map";
  return String(v);
}

const KIND: Record<string, string> = {
  string: "a string",
  number: "a number",
  int: "an integer",
  boolean: "true or false",
  array: "a list",
  object: "a map",
  record: "a map",
};

/**
 * Messages for the issues a schema does not word itself (wrong types, missing keys, sizes,
 * enums, unknown keys): each says what is wrong and the fix. Pass as `{ error: … }` to parse.
 */
export const configErrorMap: z.core.$ZodErrorMap = (iss) => {
  switch (iss.code) {
    case "invalid_type": {
      const want = KIND[iss.expected] ?? iss.expected;
      if (iss.input === undefined) return `is missing; set it to ${want}`;
      return `is ${shown(iss.input)}, not ${want}; write it as ${want}`;
    }
    case "too_small": {
      const min = Number(iss.minimum);
      if (iss.origin === "array") return `is too short; list at least ${min}`;
      if (iss.origin === "string") return `is empty; give a value`;
      return `is ${shown(iss.input)}, below the minimum; use ${min} or more`;
    }
    case "too_big": {
      const max = Number(iss.maximum);
      if (iss.origin === "array") return `is too long; list at most ${max}`;
      if (iss.origin === "string") return `is too long; use at most ${max} characters`;
      return `is ${shown(iss.input)}, above the maximum; use ${max} or less`;
    }
    case "invalid_value":
      return `is ${shown(iss.input)}; use one of ${iss.values.map((v) => JSON.stringify(v)).join(", ")}`;
    case "unrecognized_keys": {
      const shape = (iss.inst as { _zod?: { def?: { shape?: object } } } | undefined)?._zod?.def
        ?.shape;
      const known = shape ? ` (one of ${Object.keys(shape).join(", ")})` : "";
      return (
        `Unrecognized key${iss.keys.length > 1 ? "s" : ""} ${iss.keys.map((k) => JSON.stringify(k)).join(", ")}` +
        `; fix the name${known} or remove it`
      );
    }
    case "invalid_format":
      return `is ${shown(iss.input)}, not ${iss.format === "url" ? "a URL" : `a valid ${iss.format}`}; write it in full (e.g. https://huggingface.co)`;
    default:
      return undefined;
  }
};
