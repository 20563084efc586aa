// ServerApiKey's provider: the stack's generated API key (api-key.ts). Create makes 32 random
// bytes as hex; nothing afterwards makes another: read (refresh) returns what state holds, diff
// never reports a change, so `up` keeps the key the servers and clients already have. Runs in
// the dynamic-provider process: node:crypto only.
import { randomBytes } from "node:crypto";
import type * as pulumi from "@pulumi/pulumi";
import type { ProviderImpl } from "../providers/delegate";
import type { ServerApiKeyInputs, ServerApiKeyOutputs } from "./state";

export type { ServerApiKeyInputs, ServerApiKeyOutputs } from "./state";

export async function create(
  _inputs: ServerApiKeyInputs,
): Promise<pulumi.dynamic.CreateResult<ServerApiKeyOutputs>> {
  return { id: "server-api-key", outs: { key: randomBytes(32).toString("hex") } };
}

/** Refresh: the key is what state holds (there is nothing on a node to read it from). */
export async function read(
  id: string,
  props: ServerApiKeyOutputs,
): Promise<pulumi.dynamic.ReadResult<ServerApiKeyOutputs>> {
  return { id, props };
}

/** Never a change, never a replace: a new key would lock out every client that has this one. */
export async function diff(
  _id: string,
  _olds: ServerApiKeyOutputs,
  _news: ServerApiKeyInputs,
): Promise<pulumi.dynamic.DiffResult> {
  return { changes: false, replaces: [] };
}

export async function update(
  _id: string,
  olds: ServerApiKeyOutputs,
): Promise<pulumi.dynamic.UpdateResult<ServerApiKeyOutputs>> {
  return { outs: { key: olds.key } };
}

// No state upgrade: the key's one output has not changed shape since the kind existed, and its
// methods are called directly (tests) with the shape ProviderImpl's optional methods would hide.
export const provider = {
  create,
  read,
  diff,
  update,
} satisfies ProviderImpl<ServerApiKeyInputs, ServerApiKeyOutputs>;
