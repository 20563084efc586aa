// The names a supervised unit has on a node: its systemd unit, its RSS guard's unit, its state
// directory and log. The worker, the server and the router are roles of one kind of unit
// (native/unit/), and the names are what the node, the stack's outputs and `sparkform doctor`
// must agree on, so they are written here once.

/**
 * Per role: unit and guard prefixes (`<prefix>-<port>`), state directory, log name, and the
 * config key of the unit's port (what a refusal tells the user to change).
 */
export const UNIT_ROLES = {
  worker: {
    unit: "sparkform-rpc-worker",
    guard: "sparkform-rpc-guard",
    state: "~/.cache/sparkform/rpc-worker",
    log: "worker",
    portKey: "sparkform:worker.port",
  },
  server: {
    unit: "sparkform-llama-server",
    guard: "sparkform-llama-guard",
    state: "~/.cache/sparkform/serving",
    log: "server",
    portKey: "sparkform:server.port",
  },
  /**
   * The smoke's single-node reference: a second llama-server without --rpc on a loopback port,
   * started and stopped around one request. Its own state directory, so its stop removes no
   * file of a server that listens on the same port number.
   */
  reference: {
    unit: "sparkform-llama-reference",
    guard: "sparkform-llama-reference-guard",
    state: "~/.cache/sparkform/reference",
    log: "reference",
    // It listens on the server's port + 1: moving the server moves it.
    portKey: "sparkform:server.port",
  },
  /** The router in front of the server(s): Caddy (components/router/), no RSS guard. */
  router: {
    unit: "sparkform-router",
    guard: "sparkform-router-guard",
    state: "~/.cache/sparkform/router",
    log: "router",
    portKey: "sparkform:server.router.port",
  },
} as const;

export type UnitRole = keyof typeof UNIT_ROLES;

/** e.g. sparkform-rpc-worker-50052 (without `.service`). */
export const unitName = (role: UnitRole, port: number): string =>
  `${UNIT_ROLES[role].unit}-${port}`;

/** The RSS guard's unit beside `unitName(role, port)`. */
export const guardUnitName = (role: UnitRole, port: number): string =>
  `${UNIT_ROLES[role].guard}-${port}`;

/** What every unit of `role` starts with, whatever its port (doctor's "who holds this port"). */
export const unitPrefix = (role: UnitRole): string => `${UNIT_ROLES[role].unit}-`;

/** The unit's log on its node (StandardOutput=append: of the unit). */
export const unitLogPath = (role: UnitRole, port: number): string =>
  `${UNIT_ROLES[role].state}/${UNIT_ROLES[role].log}-${port}.log`;

/**
 * The file holding the stack's API key beside a unit (0600): llama-server's `--api-key-file`
 * (start.sh writes it), the router's Caddy `{file.…}` (router/files.sh writes it).
 */
export const apiKeyPath = (role: "server" | "router", port: number): string =>
  role === "router"
    ? `${UNIT_ROLES.router.state}/router-${port}.key`
    : `${UNIT_ROLES[role].state}/api-key-${port}`;

/** The router's `curl -H @file` beside its key: one line, `Authorization: Bearer <key>` (0600). */
export const routerHeaderPath = (port: number): string =>
  `${UNIT_ROLES.router.state}/router-${port}.header`;
