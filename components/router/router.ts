// The Router resource: one Caddy reverse proxy on the client node in front of the llama-server(s),
// the one OpenAI-compatible URL of the cluster (components/router/README.md).
import * as pulumi from "@pulumi/pulumi";
import * as path from "node:path";
import { isLoopbackAddress } from "../config/address";
import { ROUTER_BIND_DEFAULT, ROUTER_DEFAULTS } from "./config";
import { delegatingProvider } from "../providers/delegate";
import { SparkformResource } from "../providers/resource";
import type { SshTarget } from "../transport";
import { routerArtifactId } from "./artifact";
import type { Started } from "../unit/status";
import { ROUTER_PROGRAMS } from "./commands";
import type { RouterOutputs, RouterUpstreamInput } from "./state";
import { stackOwner } from "../unit/stack-owner";

/** Bump when the provider's behaviour changes, so `up` rewrites it in state (and restarts). */
export const ROUTER_PROVIDER_VERSION = "1";

export interface RouterArgs {
  /** The node the router runs on (the client node). */
  readonly target: pulumi.Input<SshTarget>;
  /** That node's name (the resource id, messages). */
  readonly node: string;
  /** The address the router listens on. Default 127.0.0.1 (reached by `sparkform endpoint`). */
  readonly bind?: string;
  /**
   * The key clients send (`Authorization: Bearer <key>`), a secret: the stack's
   * sparkform:serverApiKey, else the one the Serving stage made. Every route but GET /health
   * needs it. Required when `bind` is not loopback; absent only where a test runs a router so.
   */
  readonly apiKey?: pulumi.Input<string>;
  /**
   * Browser origins (`https://app.example`) let through with the router's CORS headers
   * (`sparkform:server.router.allowedOrigins`). Default none: any request with an `Origin` is
   * refused with 403 (SDK clients send none).
   */
  readonly allowedOrigins?: pulumi.Input<string[]>;
  /** TCP port, 1–65535 (no default: the serving stage picks it beside llama-server's). */
  readonly port: number;
  /** The node's architecture as `uname -m` prints it (the fact sheet's): x86_64 or aarch64. */
  readonly arch: pulumi.Input<string>;
  /** The llama-servers, e.g. `{ node: "spark-2", url: "http://10.0.0.2:8080" }`; at least one. */
  readonly upstreams: pulumi.Input<RouterUpstreamInput[]>;
  /** The serving topology (single, replicas, layer-split): recorded, restarts nothing. */
  readonly topology: pulumi.Input<string>;
  /**
   * The text of the 503 the router answers at once when no upstream can take a request (all
   * down or loading), with `Retry-After: 2`: say why and what brings it back.
   */
  readonly unavailable: pulumi.Input<string>;
  /** Seconds between active health checks (GET /health on each upstream). Default 1. */
  readonly healthIntervalSeconds?: number;
  /**
   * Seconds the create waits for GET /health through the router to answer 200 (an upstream
   * up); past it the router is stopped and the create fails. Default 60.
   */
  readonly healthTimeoutSeconds?: number;
}

const provider = delegatingProvider(path.join(__dirname, "provider.ts"));

/**
 * Caddy on the client node as an enabled systemd user unit (`sparkform-router-<port>`,
 * Restart=on-failure): a foreign Host or Origin refused (403), the key required (401),
 * least-connections over the upstreams (a conversation kept on one, each capped at its slots:
 * a 503 with Retry-After when all are full), active health checks,
 * retries of a request whose upstream is gone, streamed responses, no request logs, and a 503
 * with `unavailable` when no upstream is healthy. The binary is built on the control node for the
 * node's architecture (artifact.ts), copied and checked by sha256 before it starts. Refresh reads
 * the unit, the running binary's digest, the listener and the config's digest: drift.
 */
export class Router extends SparkformResource<"Router", RouterOutputs> {
  /** http://<bind>:<port>; OpenAI clients use `${url}/v1`. */
  declare readonly url: pulumi.Output<string>;
  /** sha256 of the Caddy binary the unit runs. */
  declare readonly binaryDigest: pulumi.Output<string>;
  /** sha256 of the config JSON on the node. */
  declare readonly configDigest: pulumi.Output<string>;
  declare readonly upstreams: pulumi.Output<RouterUpstreamInput[]>;
  /** The unit's InvocationID and NRestarts when `up` started it. */
  declare readonly started: pulumi.Output<Started>;
  declare readonly drift: pulumi.Output<string[]>;

  constructor(name: string, args: RouterArgs, opts?: pulumi.CustomResourceOptions) {
    // Off loopback the router answers whoever reaches that address: never without a key (the
    // config schema and the router-bind policy say the same; start.sh's --not-on-management
    // keeps it off the management interface all the same).
    const bind = args.bind ?? ROUTER_BIND_DEFAULT;
    if (!isLoopbackAddress(bind) && !args.apiKey)
      throw new pulumi.RunError(
        `Router ${name}: the router on ${args.node} would bind ${bind} (not loopback) without an API key, ` +
          "and pass anyone who reaches that address to the servers behind it " +
          "(sparkform:server.router.bind): give it the stack's key (the Serving stage passes " +
          "sparkform:serverApiKey, else the key it made), or bind 127.0.0.1 (the default; " +
          "`sparkform endpoint` reaches it through ssh)",
      );
    super(
      {
        kind: "Router",
        provider,
        version: ROUTER_PROVIDER_VERSION,
        programs: { programs: ROUTER_PROGRAMS },
        outputs: [
          "url",
          "unit",
          "binary",
          "binaryDigest",
          "configDigest",
          "apiKeySha256",
          "status",
          "started",
          "drift",
        ],
      },
      name,
      {
        target: args.target,
        node: args.node,
        bind,
        ...(args.apiKey ? { apiKey: pulumi.secret(args.apiKey) } : {}),
        allowedOrigins: args.allowedOrigins ?? ROUTER_DEFAULTS.allowedOrigins,
        port: args.port,
        arch: args.arch,
        artifact: pulumi.output(args.arch).apply((a) => routerArtifactId(a)),
        upstreams: args.upstreams,
        topology: args.topology,
        unavailable: args.unavailable,
        healthIntervalSeconds: args.healthIntervalSeconds ?? 1,
        healthTimeoutSeconds: args.healthTimeoutSeconds ?? 60,
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
