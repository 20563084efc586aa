// ServingDrain's dynamic-provider implementation: it holds the digests of every node's build,
// and when they change its update stops the server on the client node. The RpcWorkers depend
// on it, so `up` stops the server before any worker restarts with a new build; the
// LlamaServer depends on the workers, so it starts again only after every worker runs it.
import type * as pulumi from "@pulumi/pulumi";
import type { ProviderImpl } from "../providers/delegate";
import { changedKeys } from "../providers/diff";
import { progress } from "../providers/progress";
import { withStateUpgrade } from "../providers/state-upgrade";
import { openNode } from "../transport";
import { serverStopCommand, serverUnit } from "./commands";
import type { ServingDrainInputs, ServingDrainOutputs } from "./state";
import { upgradeServingDrain } from "./state-upgrade";

export type { ServingDrainInputs, ServingDrainOutputs } from "./state";

const DRAIN_KEYS = ["builds", "port", "target"] as const;

export async function create(
  inputs: ServingDrainInputs,
): Promise<pulumi.dynamic.CreateResult<ServingDrainOutputs>> {
  return {
    id: `${inputs.target.name}:serving-drain:${inputs.port}`,
    outs: { ...inputs, drainedAt: "" },
  };
}

export async function diff(
  _id: string,
  olds: ServingDrainOutputs,
  news: ServingDrainInputs,
): Promise<pulumi.dynamic.DiffResult> {
  const changed: string[] = changedKeys(olds, news, DRAIN_KEYS);
  return {
    changes: changed.length > 0,
    replaces: [],
    ...(changed.length ? { diffs: changed } : {}),
  };
}

/** A build changed: no client of the old build may talk to a worker of the new one. */
export async function update(
  _id: string,
  olds: ServingDrainOutputs,
  news: ServingDrainInputs,
): Promise<pulumi.dynamic.UpdateResult<ServingDrainOutputs>> {
  // The same client node is reached as it is now (an address or host key may have changed
  // since: the old address answers nothing); only a different client is reached as it was.
  const where = olds.target.name === news.target.name ? news.target : olds.target;
  await openNode(where).run(
    serverStopCommand(
      olds.port,
      news.programs,
      `stop ${serverUnit(olds.port)} before the workers restart with the new build`,
      news.owner,
    ),
    { step: "serving drain", timeoutMs: 60_000 },
  );
  await progress(
    `[${where.name}] ${serverUnit(olds.port)} stopped: the build changed, the workers restart first`,
  );
  return { outs: { ...news, drainedAt: new Date().toISOString() } };
}

export const provider = withStateUpgrade(
  { create, diff, update } satisfies ProviderImpl<ServingDrainInputs, ServingDrainOutputs>,
  upgradeServingDrain,
);
