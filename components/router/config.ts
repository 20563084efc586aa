// The router's defaults, in one place: `sparkform:server.router` (components/serving/config.ts,
// whose schema applies them) and the Router resource read them from here, so neither the
// serving stage nor the resource keeps a default of its own.

/**
 * The router's port on the client node: the one URL clients use (`sparkform endpoint`
 * forwards to it), in front of every topology.
 */
export const ROUTER_PORT_DEFAULT = 8090;
/** Loopback: `sparkform endpoint` reaches it through ssh, and no other host can. */
export const ROUTER_BIND_DEFAULT = "127.0.0.1";

/** `sparkform:server.router` when the section leaves it out: no browser origin let through. */
export const ROUTER_DEFAULTS = {
  port: ROUTER_PORT_DEFAULT,
  bind: ROUTER_BIND_DEFAULT,
  allowedOrigins: [] as string[],
};
