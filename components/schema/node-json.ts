// JSON printed by a script on a node is untrusted input on the control node: every such
// output is parsed and checked against a JSON schema here, and a failure names the node and
// the JSON path that is wrong.
import Ajv, { type ErrorObject, type ValidateFunction } from "ajv";

const ajv = new Ajv({ strict: true, allErrors: false, allowUnionTypes: true });

export type NodeJsonErrorFactory = (node: string, path: string, detail: string) => Error;

/** Output of a node-side script that is not what its schema says: names node and JSON path. */
export class NodeOutputError extends Error {
  constructor(
    what: string,
    readonly node: string,
    readonly path: string,
    detail: string,
  ) {
    super(`${what} from node "${node}" is invalid at ${path || "/"}: ${detail}`);
  }
}

function describe(e: ErrorObject): { path: string; detail: string } {
  const p = e.instancePath;
  if (e.keyword === "additionalProperties") {
    return {
      path: p,
      detail: `unexpected property ${JSON.stringify(e.params.additionalProperty)}`,
    };
  }
  if (e.keyword === "required") {
    return { path: `${p}/${String(e.params.missingProperty)}`, detail: "is missing" };
  }
  return { path: p, detail: e.message ?? e.keyword };
}

/** A parser for one script's output: `(stdout, nodeName) => T`, throwing `fail(...)`. */
export function nodeJsonParser<T>(
  schema: object,
  fail: NodeJsonErrorFactory,
): (stdout: string, node: string) => T {
  // Compiled on first use: ajv's code generation costs ~10 ms a schema, and most processes that
  // load a parser (a preview's, a diff's) never parse anything.
  let validate: ValidateFunction<T> | undefined;
  return (stdout, node) => {
    validate ??= ajv.compile<T>(schema);
    const text = stdout.trim();
    let data: unknown;
    try {
      data = JSON.parse(text);
    } catch (err) {
      const head = text.length > 120 ? `${text.slice(0, 120)}...` : text;
      throw fail(
        node,
        "",
        `not one JSON object (${(err as Error).message}); output began: ${JSON.stringify(head)}`,
      );
    }
    if (!validate(data)) {
      const first = validate.errors?.[0];
      const { path, detail } = first ? describe(first) : { path: "", detail: "invalid" };
      throw fail(node, path, detail);
    }
    return data;
  };
}
