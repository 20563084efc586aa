// The acceptance reads the engine's event log to say what an `up` did to each resource. An
// `up --refresh` starts a refresh step for every resource before its update: that is a read of
// the node, not a change, and must not count as one (it once made each updated resource read
// as a "replace", failing the no-replace check of the node-stopped fault on a correct run).
import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import * as path from "node:path";
import { afterAll, describe, expect, it } from "vitest";
import { changedSteps, opsByResource } from "../support/event-log";

const dir = mkdtempSync(path.join(tmpdir(), "sparkform-event-log-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const TYPE = "pulumi-nodejs:dynamic/sparkform:TreeSync";
const urn = (name: string) => `urn:pulumi:s::sparkform::sparkform:index:Trees$${TYPE}::${name}`;
const pre = (op: string, name: string) =>
  JSON.stringify({ resourcePreEvent: { metadata: { op, urn: urn(name), type: TYPE } } });

function log(lines: string[]): string {
  const file = path.join(dir, `events-${lines.length}-${Math.random()}.jsonl`);
  writeFileSync(file, `${lines.join("\n")}\n`);
  return file;
}

describe("event-log", () => {
  it("up --refresh: a refresh then an update is an update, not a replace", () => {
    const file = log([
      pre("refresh", "s-tree-spark-1"),
      pre("refresh", "s-tree-spark-2"),
      pre("update", "s-tree-spark-2"),
    ]);
    expect(opsByResource(file, "s")).toEqual({ "TreeSync tree-spark-2": "update" });
    expect(changedSteps(file).map((s) => s.op)).toEqual(["update"]);
  });

  it("a replacement's two steps are one replace", () => {
    const file = log([
      pre("create-replacement", "s-tree-spark-1"),
      pre("delete-replaced", "s-tree-spark-1"),
    ]);
    expect(opsByResource(file, "s")).toEqual({ "TreeSync tree-spark-1": "replace" });
  });
});
