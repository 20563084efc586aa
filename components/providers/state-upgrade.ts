// State upgrades in one place per kind, as pulumi-go-provider's state migrations do.
//
// A resource's outputs in state were written by whichever sparkform ran its last `up`. Each kind
// keeps one `upgrade(olds)` (components/<stage>/state-upgrade.ts) that fills in what older state
// lacks, and its provider module exports `withStateUpgrade(impl, upgrade)` as `provider`, so
// every method that receives recorded outputs (read, diff, update, delete) sees the current
// shape and carries no "state written before …" branches of its own.
//
// The wrapper sits on the module's `provider` export, not in delegatingProvider: the delegating
// methods are serialized into state at each `up`, and `refresh`/`destroy` run the copy in state,
// which loads the module and takes `provider` from it, so an upgrade placed here applies to
// stacks whose saved copy predates it. docs/state-compatibility.md says the rules.
import type { ProviderImpl } from "./delegate";

/**
 * Fills what older recorded outputs lack. Pure and idempotent: the current shape comes back
 * unchanged (state-upgrade tests hold each kind to that).
 */
export type StateUpgrade<O> = (olds: O) => O;

/** `impl` with `upgrade` applied to the recorded outputs every method receives. */
export function withStateUpgrade<I, O, P extends ProviderImpl<I, O>>(
  impl: P & ProviderImpl<I, O>,
  upgrade: StateUpgrade<O>,
): P {
  const { read, diff, update, delete: remove } = impl;
  // The same methods as `impl` (so the same type): each one that is there, wrapped.
  return {
    ...impl,
    ...(read && { read: (id: string, props: O) => read(id, upgrade(props)) }),
    ...(diff && { diff: (id: string, olds: O, news: I) => diff(id, upgrade(olds), news) }),
    ...(update && {
      update: (id: string, olds: O, news: I) => update(id, upgrade(olds), news),
    }),
    ...(remove && { delete: (id: string, props: O) => remove(id, upgrade(props)) }),
  } as P;
}
