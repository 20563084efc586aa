// One bench item as bench/run.ts drives it: the names `--only` selects it by, what it needs
// standing before it runs, how it runs, and its section of the report.

/**
 * What an item measures against: `stack`, the converged stack `--stack` names (`npm run local`
 * first); `local-sim`, the nodes and hub `npm run local` leaves running (the item makes its own
 * small stacks on them); `own-sim`, a simulated cluster the item stands up and tears down (root);
 * `own-postgres`, a PostgreSQL server and small stacks of the item's own (Debian's postgresql, as
 * `npm run setup` installs it as root), no cluster.
 */
export type Need = "stack" | "local-sim" | "own-sim" | "own-postgres";

/** The command line's settings, shared by every item (each reads what it uses). */
export interface ItemContext {
  stack: string;
  node: string;
  runs: number;
  refreshes: number;
  base?: string;
  commands: readonly string[];
  editFile?: string;
  /** The results directory. */
  out: string;
  /** The report's file name without extension: plots and side files are named after it. */
  prefix: string;
  /** The item names asked for (an item answering several names runs the ones asked). */
  only: readonly string[];
  log(s: string): void;
}

export interface Item<R = unknown> {
  /** Its key in the results JSON, and the name `--only` selects it by. */
  name: string;
  /** Every name `--only` selects it by, when it answers more than one (default: `name`). */
  selects?: readonly string[];
  needs: Need;
  run(ctx: ItemContext): R | Promise<R>;
  /** Its section of the report, heading included. */
  markdown(r: R, ctx: ItemContext): string;
  /** Its entries in the results JSON (default: `{ [name]: r }`). */
  json?(r: R): Record<string, unknown>;
}

/** The names `--only` selects `item` by. */
export const selectors = (item: Item): readonly string[] => item.selects ?? [item.name];

/** The items `only` asks for, in their order (an item is run once however many of its names). */
export function selected(items: readonly Item[], only: readonly string[]): Item[] {
  return items.filter((i) => selectors(i).some((n) => only.includes(n)));
}

/** An item typed for its result, stored among items of any result. */
export const item = <R>(i: Item<R>): Item => i as unknown as Item;
