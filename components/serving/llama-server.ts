// The LlamaServer resource: one llama-server unit on the client node, with the plan and the
// evidence as inputs so the policy pack judges them before it starts.
import type { RollRouter } from "./roll";
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { isLoopbackAddress } from "../config/address";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import type { ServingPlan } from "./placement";
import type { TopologyChoice } from "./topology";
import type { LlamaServerOutputs, ServingEvidence, ServingWorker, SmokeOutput } from "./provider";
import type { FabricRails, SeenDevice } from "./state";
import { SERVER_PROGRAMS } from "./commands";
import { stackOwner } from "../unit/stack-owner";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state (and restarts). */
// 2: the server runs at its default verbosity (placement from INFO lines), its status in state
// holds no log, the smoke asks the chat endpoint too and keeps no generated text.
export const LLAMA_SERVER_PROVIDER_VERSION = "2";

export interface LlamaServerArgs {
  /** The client node. */
  readonly target: pulumi.Input<SshTarget>;
  readonly node: string;
  /** Default 127.0.0.1; any other address needs `apiKey`. */
  readonly bind: string;
  /** TCP port (default 8080); the smoke's single-node reference uses the next one. */
  readonly port: number;
  readonly unit: string;
  /**
   * The stack's key (sparkform:serverApiKey, else the generated one): a Pulumi secret, read by
   * llama-server from a 0600 file. Required off loopback.
   */
  readonly apiKey?: pulumi.Input<string>;
  readonly plan: pulumi.Input<ServingPlan>;
  readonly evidence: pulumi.Input<ServingEvidence>;
  /** renderings(plan).llamaServer: the plan's flags, the model path included. */
  readonly flags: pulumi.Input<string[]>;
  /** The client's NativeBuild installDir and artifact digests (bin/llama-server). */
  readonly build: {
    installDir: pulumi.Input<string>;
    artifacts: pulumi.Input<Record<string, string>>;
  };
  readonly modelPath: pulumi.Input<string>;
  readonly clientDevice: string;
  readonly smoke: { prompt: string; tokens: number; seed: number };
  /**
   * The topology the stage chose, with its reason (components/serving/topology.ts): the
   * advisory policy layer-split-fits-one-node reads it.
   */
  readonly topology?: pulumi.Input<TopologyChoice>;
  /**
   * A replica that the chosen topology does not use (auto chose a layer split): nothing runs
   * on its node, and the policies do not judge its plan. Default false.
   */
  readonly standby?: pulumi.Input<boolean>;
  /** The workers the plan uses: their debug logs show the decode fast path. */
  readonly workers: pulumi.Input<ServingWorker[]>;
  /**
   * The router in front of the server (its node's target and its port): an update takes the
   * server out of the router's rotation while it restarts (roll.ts). Absent: restarted in place.
   */
  readonly router?: pulumi.Input<RollRouter>;
  /**
   * Per node, its rails from the Fabric stage (`Fabric.railInterfaces()`): the smoke's wire
   * proof holds each end of a split to a rail the pair shares. Absent: no Fabric stage, the
   * rails are not checked (the verdict says so). Never restarts the server (not a RESTART_KEY).
   */
  readonly fabricRails?: pulumi.Input<FabricRails>;
  /** How long the model load may take before the server counts as not up (default 1800 s). */
  readonly healthTimeoutSeconds?: number;
  /**
   * The RSS guard beside the server stops it at this % of the node's RAM used (0 = no guard,
   * which the rss-guard-on policy refuses): `sparkform:server.rssLimitPercent`, default 92.
   */
  readonly rssLimitPercent: number;
  /** How often the guard samples, seconds (`sparkform:server.rssIntervalSeconds`, default 2). */
  readonly rssIntervalSeconds: number;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));
const SERVER = "bin/llama-server";

/**
 * llama-server on the client node as an enabled systemd user unit with the plan's flags, bound
 * to loopback unless configured; created only when its log shows the model on every planned
 * device with the planned layers, and a smoke generation equals a single-node run's.
 */
export class LlamaServer extends SparkformResource<"LlamaServer", LlamaServerOutputs> {
  declare readonly url: pulumi.Output<string>;
  declare readonly unit: pulumi.Output<string>;
  declare readonly health: pulumi.Output<string>;
  declare readonly placement: pulumi.Output<SeenDevice[]>;
  declare readonly smoke: pulumi.Output<SmokeOutput>;
  declare readonly drift: pulumi.Output<string[]>;

  constructor(name: string, args: LlamaServerArgs, opts?: pulumi.CustomResourceOptions) {
    // Off loopback (a replica on its fabric address, a client bound to another address) the
    // server answers whoever reaches that address: never without a key. The Serving stage always
    // passes one (sparkform:serverApiKey, else the stack's generated key); the node-side check
    // (start.sh's notOnManagement, provider.ts) stays for a keyless server all the same.
    if (!isLoopbackAddress(args.bind) && !args.apiKey)
      throw new pulumi.RunError(
        `LlamaServer ${name}: llama-server on ${args.node} would bind ${args.bind} (not loopback) without an API key, ` +
          "and answer anyone who reaches that address: pass the stack's key (the Serving stage passes " +
          "sparkform:serverApiKey, else the key it makes), or bind 127.0.0.1",
      );
    super(
      {
        kind: "LlamaServer",
        provider,
        version: LLAMA_SERVER_PROVIDER_VERSION,
        programs: { programs: SERVER_PROGRAMS },
        outputs: [
          "apiKeySha256",
          "url",
          "health",
          "placement",
          "smoke",
          "status",
          "started",
          "drift",
        ],
      },
      name,
      {
        target: args.target,
        node: args.node,
        bind: args.bind,
        port: args.port,
        unit: args.unit,
        ...(args.apiKey ? { apiKey: pulumi.secret(args.apiKey) } : {}),
        plan: args.plan,
        evidence: args.evidence,
        flags: args.flags,
        binary: pulumi.output(args.build.installDir).apply((d) => `${d}/${SERVER}`),
        binaryDigest: pulumi.output(args.build.artifacts).apply((a) => a[SERVER] ?? ""),
        modelPath: args.modelPath,
        clientDevice: args.clientDevice,
        smokeRequest: args.smoke,
        workers: args.workers,
        ...(args.router ? { router: args.router } : {}),
        ...(args.fabricRails ? { fabricRails: args.fabricRails } : {}),
        ...(args.topology ? { topology: args.topology } : {}),
        standby: args.standby ?? false,
        healthTimeoutSeconds: args.healthTimeoutSeconds ?? 1800,
        rssLimitPercent: args.rssLimitPercent,
        rssIntervalSeconds: args.rssIntervalSeconds,
        // The stack its unit belongs to (recorded on it; another stack's port is refused).
        owner: stackOwner(),
      },
      {
        ...opts,
        additionalSecretOutputs: [...(opts?.additionalSecretOutputs ?? []), "apiKeySha256"],
      },
    );
  }
}
