// What native/model/model-fetch.py prints on a node, checked on the control node: every
// `@<kind> <json>` line through the one ajv parser against the shapes the program declares
// beside it (native/model/model-fetch.schema.json, schema/program-json.ts), every file list
// intersected with the files the resource asked for, and every path a relay uses on the control
// node contained in its staging directory. A node's output is untrusted input here: a hostile
// or broken node printing `"todo": ["../../../../.ssh/id_ed25519"]` must not make the control
// node read a peer's key or write outside staging.
import * as path from "node:path";
import { NodeOutputError } from "../schema/node-json";
import { programJsonParser } from "../schema/program-json";
import { FETCH_PROGRAM } from "./commands";

export interface ScriptLine {
  kind: "progress" | "event" | "result";
  data: Record<string, unknown>;
}

/** One of the output shapes native/model/model-fetch.schema.json declares (its $defs). */
function shapeParser<T>(shape: string, what: string) {
  return programJsonParser<T>(
    FETCH_PROGRAM,
    (node, p, detail) => new NodeOutputError(`model-fetch.py ${what}`, node, p, detail),
    shape,
  );
}

const parseProgress = shapeParser<Record<string, unknown>>("progress", "@progress line");
const parseEvent = shapeParser<Record<string, unknown>>("event", "@event line");

export interface FilesResult {
  files: Array<{
    path: string;
    present: boolean;
    size: number;
    mtimeNs: string;
    sha256: string;
    partBytes: number;
  }>;
}
export interface PrepareResult {
  todo: string[];
  need: number;
  free: number;
}
export interface RemoveResult {
  removed: string[];
  /** Files asked for and kept: another reference of the directory still lists them. */
  kept: string[];
}

export const parseFilesResult = shapeParser<FilesResult>("files", "@result (files)");
export const parsePrepareResult = shapeParser<PrepareResult>("prepare", "@result (prepare)");
export const parseRemoveResult = shapeParser<RemoveResult>("remove", "@result (remove)");

const LINE = /^@(\w+) (.*)$/;

/**
 * One output line: undefined for a line that is not `@<kind> <json>` (plain output); a
 * progress or event line checked against its schema; a result line kept as raw JSON for the
 * command's own parser (resultOf). Throws NodeOutputError for a line that claims a kind and
 * is not that kind's JSON.
 */
export function parseScriptLine(line: string, node: string): ScriptLine | undefined {
  const m = LINE.exec(line.trim());
  if (!m) return undefined;
  const [, kind = "", json = ""] = m;
  if (kind === "progress") return { kind, data: parseProgress(json, node) };
  if (kind === "event") return { kind, data: parseEvent(json, node) };
  if (kind === "result") {
    // Checked by the command's parser; here only that it is JSON text (kept as a string).
    return { kind, data: { json } };
  }
  throw new NodeOutputError(
    "model-fetch.py output",
    node,
    "",
    `unknown line kind @${kind} (expected @progress, @event or @result)`,
  );
}

/** The last @result of a run, through `parse` (one of the parse…Result above). */
export function resultOf<T>(
  lines: readonly ScriptLine[],
  node: string,
  parse: (json: string, node: string) => T,
): T {
  const r = [...lines].reverse().find((l) => l.kind === "result");
  if (!r)
    throw new Error(`model-fetch.py printed no @result line on ${node}; this is a sparkform bug`);
  return parse(String(r.data.json), node);
}

/**
 * A file list from a node, intersected with the files the resource asked for: a path the
 * node names that was not asked for is refused (a broken or hostile node), never used.
 */
export function askedFiles(
  reported: readonly string[],
  asked: readonly string[],
  node: string,
  what: string,
): string[] {
  const unknown = reported.filter((p) => !asked.includes(p));
  if (unknown.length > 0) {
    throw new NodeOutputError(
      what,
      node,
      "",
      `names file(s) the resource did not ask for: ${unknown
        .slice(0, 3)
        .map((p) => JSON.stringify(p))
        .join(", ")}; nothing was copied`,
    );
  }
  return asked.filter((p) => reported.includes(p));
}

/**
 * `file` (a repo path) below `root` on the control node, or an error when it would land
 * anywhere else: absolute, `..`, empty or `.` parts, a backslash.
 */
export function containedPath(root: string, file: string): string {
  const parts = file.split("/");
  if (
    file === "" ||
    file.includes("\\") ||
    file.includes("\0") ||
    parts.some((p) => p === "" || p === "." || p === "..")
  ) {
    throw new Error(
      `model file ${JSON.stringify(file)} is not a plain relative path; refusing to use it on the control node`,
    );
  }
  const base = path.resolve(root);
  const p = path.resolve(base, ...parts);
  if (!p.startsWith(base + path.sep)) {
    throw new Error(
      `model file ${JSON.stringify(file)} resolves outside the staging directory ${base}; refusing it`,
    );
  }
  return p;
}
