// The stack's API key when sparkform:serverApiKey is not set (issue 33): every stack has one,
// so no llama-server (the client's, or a replica on a worker's fabric address) and no router
// ever answers without it. A dynamic resource of its own (`pulumi-nodejs:dynamic/sparkform:
// ServerApiKey`), child of the Serving stage: its provider (api-key-provider.ts) makes 32 random
// bytes once, at create, and keeps them through refresh and update. The key is a secret output,
// so state holds it encrypted; `sparkform key` reads it from the stack output `serverApiKey`.
//
// Not one of kinds.ts's KINDS: it runs nothing on a node and carries no evidence for the
// policy pack (whose kindOf passes over a type it does not know).
import * as path from "node:path";
import * as pulumi from "@pulumi/pulumi";
import { TYPE_MODULE } from "../kinds";
import { delegatingProvider } from "../providers/delegate";

const provider = delegatingProvider(path.join(__dirname, "api-key-provider.ts"));

export class ServerApiKey extends pulumi.dynamic.Resource {
  /** 64 hex characters (a secret). */
  declare readonly key: pulumi.Output<string>;

  constructor(name: string, opts?: pulumi.CustomResourceOptions) {
    super(
      provider,
      name,
      { key: undefined },
      {
        ...opts,
        additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "key"],
      },
      TYPE_MODULE,
      "ServerApiKey",
    );
  }
}
