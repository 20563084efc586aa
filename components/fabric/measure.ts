// One rail of one link, measured over ssh: native/fabric/rail-rtt-throughput.py as a server bound to the far
// end's rail address, the client on the near end bound to its own, so the bytes cross exactly
// that rail. Never ICMP. Measurements in one provider process run one at a time: two rails
// measured at once would share the nodes' cores and halve each other's throughput.
import { run, type SshTarget } from "../transport";
import { addressOf } from "./checks";
import { clientArgs, parseListening, parseProbe, serverArgs, type ProbeResult } from "./probe";

export interface ProbeEnd {
  readonly node: string;
  readonly target: SshTarget;
  /** The address the probe binds on this end (the rail's). */
  readonly address: string;
  readonly cpus: readonly number[] | null;
}

export interface ProbeSettings {
  /** RTT round trips. */
  readonly count: number;
  /** Seconds of bulk send. */
  readonly seconds: number;
  /**
   * Seconds of bulk send of a refresh's first reading (readings.ts burstSettings); absent in a
   * state written before it existed, and in the settings of one probe.
   */
  readonly refreshSeconds?: number;
}

let queue: Promise<unknown> = Promise.resolve();

/** Run `f` after every measurement queued before it (this process only). */
function serialized<T>(f: () => Promise<T>): Promise<T> {
  const next = queue.then(f, f);
  queue = next.catch(() => undefined);
  return next;
}

const PY = 'exec python3 - "$@"';

async function probeOnce(
  script: string,
  server: ProbeEnd,
  client: ProbeEnd,
  o: ProbeSettings,
): Promise<ProbeResult> {
  // The server gives up on its own well after the client's bounded run (connect 3 s, RTT
  // rounds, the bulk send, the reply), so nothing outlives a failed measurement for long.
  const serverTimeoutS = Math.ceil(10 + o.seconds * 2);
  const bind = addressOf(server.address);
  let onPort: (p: number) => void = () => undefined;
  let onFail: (e: Error) => void = () => undefined;
  const port = new Promise<number>((resolve, reject) => {
    onPort = resolve;
    onFail = reject;
  });
  const serving = run(
    server.target,
    {
      script: PY,
      args: serverArgs(bind, serverTimeoutS, server.cpus),
      stdin: script,
      display: `python3 native/fabric/rail-rtt-throughput.py server --bind ${bind}`,
    },
    {
      step: `fabric probe server (${server.node} ${bind})`,
      timeoutMs: (serverTimeoutS + 30) * 1000,
      okExitCodes: [0, 4, 5],
      onLine: (line, stream) => {
        if (stream !== "stdout" || !line.includes('"listening"')) return;
        try {
          onPort(parseListening(line, `fabric probe server on ${server.node}`));
        } catch (e) {
          onFail(e as Error);
        }
      },
    },
  );
  serving.then(
    () => onFail(new Error(`fabric probe server on ${server.node} exited before listening`)),
    (e: unknown) => onFail(e as Error),
  );
  const p = await port;
  const target = addressOf(server.address);
  const c = await run(
    client.target,
    {
      script: PY,
      args: clientArgs(target, p, addressOf(client.address), {
        count: o.count,
        seconds: o.seconds,
        cpus: client.cpus,
      }),
      stdin: script,
      display: `python3 native/fabric/rail-rtt-throughput.py client --addr ${target} --port ${p}`,
    },
    {
      step: `fabric probe client (${client.node} → ${server.node} ${target})`,
      timeoutMs: (o.seconds + 60) * 1000,
      okExitCodes: [0, 3],
    },
  );
  const result = parseProbe(c.stdout, `fabric probe client on ${client.node}`);
  if (result.error !== null) {
    // The client could not get through: tell the server so it stops waiting for it.
    await run(
      server.target,
      { script: PY, args: ["quit", "--addr", bind, "--port", String(p)], stdin: script },
      { step: `fabric probe quit (${server.node})`, timeoutMs: 30_000, okExitCodes: [0, 1] },
    ).catch(() => undefined);
  }
  await serving.catch(() => undefined);
  return result;
}

/**
 * Measure from `client` to `server` (TCP RTT and throughput). A failure to start the server
 * (the node unreachable, python3 missing) is thrown; a link that does not carry the probe is a
 * result with `error` set.
 */
export function measure(
  script: string,
  server: ProbeEnd,
  client: ProbeEnd,
  o: ProbeSettings,
): Promise<ProbeResult> {
  return serialized(() => probeOnce(script, server, client, o));
}

/** Whether perftest is installed on a node (ib_write_bw, ib_send_lat). */
export async function perftestPresent(target: SshTarget): Promise<boolean> {
  const r = await run(
    target,
    { script: "command -v ib_write_bw >/dev/null && command -v ib_send_lat >/dev/null" },
    { step: "perftest present", timeoutMs: 30_000, okExitCodes: [0, 1, 127] },
  );
  return r.exitCode === 0;
}
