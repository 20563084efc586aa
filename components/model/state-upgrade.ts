// ModelReplica state as older sparkform wrote it, brought to the current shape (read, diff,
// update and delete see only this; components/providers/state-upgrade.ts). A missing `refToken`
// is not filled: nothing on the node says whether another stack uses the revision, so delete
// keeps its files.
import type { StateUpgrade } from "../providers/state-upgrade";
import type { ModelReplicaOutputs } from "./state";

export const upgrade: StateUpgrade<ModelReplicaOutputs> = (olds) =>
  Array.isArray(olds.created) && Array.isArray(olds.nodeFiles)
    ? olds
    : {
        ...olds,
        // Older sparkform's state could lack the list of files it put in place: it owns none.
        created: olds.created ?? [],
        // Or the files as measured on the node: none known, so every file is drift.
        nodeFiles: olds.nodeFiles ?? [],
      };
