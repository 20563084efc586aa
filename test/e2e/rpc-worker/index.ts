// Test program for the RpcWorker stage: the main program's SparkCluster (stack.ts: nodes, tree,
// build) on a config subset, then the worker stage composed on it exactly as cluster.ts is to
// compose it (see the wiring in the RpcWorker report), until the lead wires it there.
import * as pulumi from "@pulumi/pulumi";
import { readStackConfig } from "../../../components/config";
import { RpcWorkers } from "../../../components/rpc-worker/workers";
import { stackCluster } from "../../../components/stack";

const cluster = stackCluster(__dirname);
const config = readStackConfig(new pulumi.Config("sparkform"), { projectDir: __dirname });
const { trees, builds } = cluster;
if (!trees || !builds)
  throw new Error("this test program needs sparkform:tree and sparkform:build");
const w = config.worker;
export const build = builds.byNode;
export const worker = w
  ? new RpcWorkers(
      `${pulumi.getStack()}-worker`,
      {
        nodes: cluster.nodes,
        nodeConfigs: config.nodes,
        builds,
        trees,
        client: w.client,
        workers: w.nodes,
        port: w.port,
        threads: w.threads,
        devices: w.devices,
        cache: w.cache,
        debug: w.debug,
        rssLimitPercent: w.rssLimitPercent,
        rssIntervalSeconds: w.rssIntervalSeconds,
        ...(cluster.model ? { model: cluster.model } : {}),
      },
      { dependsOn: [...builds.ready] },
    ).byNode
  : undefined;
