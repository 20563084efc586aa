// Test program for test/e2e/rpc-worker.test.ts: the main program's SparkCluster (stack.ts) on a
// config subset (nodes, tree, build, model, worker).
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
if (!cluster.builds || !cluster.worker) {
  throw new Error("this test program needs sparkform:tree, sparkform:build and sparkform:worker");
}
export const build = cluster.builds.byNode;
export const worker = cluster.worker;
