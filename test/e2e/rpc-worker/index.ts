// Test program for the RpcWorker stage: the main program's SparkCluster (stack.ts: nodes, tree,
// build, model) on a config subset, then the worker stage composed on it with the same call
// SparkCluster is to make (rpcWorkersFor), until the lead wires it there.
import * as pulumi from "@pulumi/pulumi";
import { readStackConfig } from "../../../components/config";
import { rpcWorkersFor } from "../../../components/rpc-worker/workers";
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
const config = readStackConfig(new pulumi.Config("sparkform"), { projectDir: __dirname });
const { trees, builds, model, fabric } = cluster;
if (!trees || !builds)
  throw new Error("this test program needs sparkform:tree and sparkform:build");
export const build = builds.byNode;
export const worker = rpcWorkersFor(
  `${pulumi.getStack()}-worker`,
  {
    nodes: cluster.nodes,
    builds,
    trees,
    ...(model ? { model } : {}),
    ...(fabric ? { fabric } : {}),
  },
  config,
)?.byNode;
