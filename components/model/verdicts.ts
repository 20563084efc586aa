// What a ModelReplica diff counts as drift: a file not known to hold the hub's bytes.
import type { ModelReplicaInputs, ModelReplicaOutputs } from "./state";

/** Files that are not known to hold the hub's bytes on the node. */
export function driftedFiles(
  olds: Pick<ModelReplicaOutputs, "nodeFiles">,
  news: Pick<ModelReplicaInputs, "files">,
): string[] {
  return news.files
    .filter((f) => {
      const n = olds.nodeFiles?.find((x) => x.path === f.path);
      return !n || !n.present || n.size !== f.size || n.sha256 !== f.sha256;
    })
    .map((f) => f.path);
}
