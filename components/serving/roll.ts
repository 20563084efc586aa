// A llama-server behind the router restarted without dropping a client (issue 35 item 7): out of
// the router's rotation first (native/router/roll.py writes its dial into the drain file the
// router's own selection policy reads per request), then, once its slots are idle (bounded),
// restarted and smoked as any update does, then back in rotation. The replicas restart one after
// another (serving.ts chains them), so another one serves meanwhile. A server that is the
// router's only upstream (a layer split, a single server), or whose peers do not answer /health,
// is restarted as before, in rotation: the router's 503 says why while it is down.
import { dialOf } from "../router/caddy-config";
import { configPath, drainPath } from "../router/commands";
import { programCommand } from "../native-script";
import { progress } from "../providers/progress";
import { programJsonParser } from "../schema/program-json";
import { NodeOutputError } from "../schema/node-json";
import { openNode, type RemoteScript, type SshTarget } from "../transport";
import { apiKeyEnv } from "../unit/api-key";

export const ROLL_PROGRAM = "router/roll.py";

/**
 * How long a server out of rotation may take to finish the requests it is serving before it is
 * restarted anyway, seconds: a long generation (a few thousand tokens on a Spark) fits.
 */
export const ROLL_IDLE_TIMEOUT_SECONDS = 120;

/** After a server is back in the drain file: two of the router's health checks (1 s apart). */
export const ROLL_SETTLE_SECONDS = 2;

/** The router a server is behind: on which node, and its port (its files are named by it). */
export interface RollRouter {
  readonly target: SshTarget;
  readonly port: number;
}

interface RollOut {
  out: boolean;
  idle?: boolean;
  waitedSeconds?: number;
  reason: string;
}

const parseRollOut = programJsonParser<RollOut>(
  ROLL_PROGRAM,
  (node, path, detail) =>
    new NodeOutputError("roll out (native/router/roll.py)", node, path, detail),
  "out",
);
const parseRollIn = programJsonParser<{ in: true; drained: string[] }>(
  ROLL_PROGRAM,
  (node, path, detail) =>
    new NodeOutputError("roll in (native/router/roll.py)", node, path, detail),
  "in",
);

export function rollOutCommand(router: RollRouter, dial: string, apiKey?: string): RemoteScript {
  return programCommand(ROLL_PROGRAM, {
    args: [
      "out",
      configPath(router.port),
      drainPath(router.port),
      dial,
      String(ROLL_IDLE_TIMEOUT_SECONDS),
    ],
    ...apiKeyEnv(apiKey),
    display: `take ${dial} out of the router's rotation (${drainPath(router.port)}), wait for its slots`,
  });
}

export function rollInCommand(router: RollRouter, dial: string): RemoteScript {
  return programCommand(ROLL_PROGRAM, {
    args: ["in", drainPath(router.port), dial, String(ROLL_SETTLE_SECONDS)],
    display: `put ${dial} back in the router's rotation`,
  });
}

/**
 * `restart()` with the server at `url` out of `router`'s rotation meanwhile, when it can be
 * taken out; `who` names it in the progress lines.
 */
export async function rolled<T>(
  s: { router?: RollRouter; url: string; apiKey?: string; who: string },
  restart: () => Promise<T>,
): Promise<T> {
  if (!s.router) return restart();
  const router = s.router;
  const dial = dialOf(s.url);
  const node = openNode(router.target);
  const out = parseRollOut(
    (
      await node.run(rollOutCommand(router, dial, s.apiKey), {
        step: "roll out",
        timeoutMs: (ROLL_IDLE_TIMEOUT_SECONDS + 60) * 1000,
      })
    ).stdout,
    router.target.name,
  );
  if (!out.out) {
    await progress(`${s.who}: restarted in rotation: ${out.reason}`);
    return restart();
  }
  await progress(
    `${s.who}: out of the router's rotation; ` +
      (out.idle
        ? `its slots idle after ${out.waitedSeconds ?? 0} s`
        : `restarted with requests in flight: ${out.reason}`),
  );
  const putBack = async () => {
    try {
      parseRollIn(
        (
          await node.run(rollInCommand(router, dial), {
            step: "roll in",
            timeoutMs: (ROLL_SETTLE_SECONDS + 60) * 1000,
          })
        ).stdout,
        router.target.name,
      );
    } catch (err) {
      // Left out of rotation, the server is the router's drift (its refresh names the drain
      // file), and the next `up --refresh` puts it back.
      throw new Error(
        `${s.who}: could not put ${dial} back in the router's rotation on ${router.target.name}: ` +
          `${(err as Error).message}. \`pulumi up --refresh\` puts it back.`,
        { cause: err },
      );
    }
    await progress(`${s.who}: back in the router's rotation`);
  };
  let restarted: T;
  try {
    restarted = await restart();
  } catch (err) {
    // Back in rotation even so (the router's health checks judge it); the restart's error is
    // the one that matters.
    await putBack().catch((e: unknown) => progress((e as Error).message));
    throw err;
  }
  await putBack();
  return restarted;
}
