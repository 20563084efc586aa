// Test program for test/e2e/serving.test.ts: the main program's SparkCluster (stack.ts) on a
// config subset (nodes, tree, build, model, worker, server).
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
if (!cluster.builds || !cluster.worker || !cluster.serving) {
  throw new Error(
    "this test program needs sparkform:tree, sparkform:build, sparkform:model, sparkform:worker and sparkform:server",
  );
}
export const build = cluster.builds.byNode;
export const worker = cluster.worker;
export const serving = cluster.serving;
/** The key every server and the router check, as the main program exports it (`sparkform key`). */
export const serverApiKey = cluster.servingStage?.apiKey;
