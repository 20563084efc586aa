// sim/world/pulumi-cli.ts: a failed run's error ends with the resources that changed, so a
// CI report that keeps only the tail still names them (a refresh's "~ 2 updated" alone did not).
import { describe, expect, it } from "vitest";
import { changedResourceLines } from "../../sim/world/pulumi-cli";

const REFRESH = `Refreshing (model-4242):

@ refreshing....
    pulumi:pulumi:Stack sparkform-model-e2e-model-4242 running 
 ~  pulumi-nodejs:dynamic/sparkform:FabricLink model-4242-fabric-spark-1-spark-2-rail0 refreshing (0s) 
 ~  pulumi-nodejs:dynamic/sparkform:FabricLink model-4242-fabric-spark-1-spark-2-rail0 updated (7s) [diff: ~checks,class]
    pulumi-nodejs:dynamic/sparkform:SparkNode model-4242-node-spark-1  (1s) 
 ~  pulumi-nodejs:dynamic/sparkform:FabricLink model-4242-fabric-spark-1-spark-2-rail1 updated (9s) [diff: ~class]
Outputs:
    commit: "1e8e0ae013767df70f653656cf929162bd1242af"

Resources:
    ~ 2 updated
    9 unchanged
`;

describe("changedResourceLines", () => {
  it("names each changed resource with its diff, not the progress lines or the summary", () => {
    expect(changedResourceLines(REFRESH)).toEqual([
      "~  pulumi-nodejs:dynamic/sparkform:FabricLink model-4242-fabric-spark-1-spark-2-rail0 updated (7s) [diff: ~checks,class]",
      "~  pulumi-nodejs:dynamic/sparkform:FabricLink model-4242-fabric-spark-1-spark-2-rail1 updated (9s) [diff: ~class]",
    ]);
  });

  it("reads a preview's planned steps and replaces", () => {
    const preview = [
      " ~  pulumi-nodejs:dynamic/sparkform:ModelReplica m-model-spark-2 update [diff: ~files]",
      " +-  pulumi-nodejs:dynamic/sparkform:NativeBuild m-build-spark-1 replace [diff: ~commit]",
      "     pulumi:pulumi:Stack sparkform-m  ",
    ].join("\n");
    expect(changedResourceLines(preview)).toEqual([
      "~  pulumi-nodejs:dynamic/sparkform:ModelReplica m-model-spark-2 update [diff: ~files]",
      "+-  pulumi-nodejs:dynamic/sparkform:NativeBuild m-build-spark-1 replace [diff: ~commit]",
    ]);
  });

  it("an unchanged run names nothing", () => {
    expect(changedResourceLines("Resources:\n    11 unchanged\n")).toEqual([]);
  });
});
