// The stack output `model`: each node's files without mtimeNs/partBytes (refresh's readings);
// ModelReplica's state keeps them. Structural, so the stage's descriptor can name it without
// importing the stage's components.
import { eachRecord, isRecord } from "../schema/output-cut";

/** The stack output `model.nodes.<node>`: each file's presence, size and digest. */
export interface ModelNodeOutput {
  dir: string;
  fetchedBy: string;
  files: { path: string; present: boolean; size: number; sha256: string }[];
}

/** A ModelReplica's node summary (ModelOnNode) or its output: the fields kept. */
export function modelNodeOutput(n: ModelNodeOutput): ModelNodeOutput {
  return {
    dir: n.dir,
    fetchedBy: n.fetchedBy,
    files: (Array.isArray(n.files) ? n.files : []).map((f) => ({
      path: f.path,
      present: f.present,
      size: f.size,
      sha256: f.sha256,
    })),
  };
}

/** The cut of the `model` output: each node's files, when it has its nodes. */
export function modelOutput(m: Record<string, unknown>): Record<string, unknown> {
  return isRecord(m.nodes) ? { ...m, nodes: eachRecord(modelNodeOutput)(m.nodes) } : m;
}
