// Dynamic providers whose methods live in ordinary modules.
//
// Pulumi serializes a dynamic provider's methods into state and runs them in a separate
// process (also for `refresh` and `destroy`, from the copy in state). Serializing real code
// that way captures whole module graphs by value. Instead each provider here is a thin
// object whose methods load one implementation module by path — the only thing captured is
// that path — after registering components/ts/require.js so the TypeScript loads in plain node (esbuild,
// cached by content: the provider process compiles nothing a previous run compiled).
// The path is captured relative to the project directory (the program's working directory,
// which is also the provider process's), so state is the same in every checkout and a moved
// or second checkout can `refresh` and `destroy` a stack without an `up` first.
import * as path from "node:path";
import type * as pulumi from "@pulumi/pulumi";

/**
 * What an implementation module offers: plain-typed CRUD, as dynamic providers take. Each
 * `components/<stage>/provider.ts` ends with
 * `export const provider = { create, read, … } satisfies ProviderImpl<I, O>`, and keeps the
 * methods as named exports too (what state written before `provider` existed loads).
 */
export interface ProviderImpl<I, O> {
  create(inputs: I): Promise<pulumi.dynamic.CreateResult<O>>;
  read?(id: string, props: O): Promise<pulumi.dynamic.ReadResult<O>>;
  diff?(id: string, olds: O, news: I): Promise<pulumi.dynamic.DiffResult>;
  update?(id: string, olds: O, news: I): Promise<pulumi.dynamic.UpdateResult<O>>;
  delete?(id: string, props: O): Promise<void>;
  check?(olds: I, news: I): Promise<pulumi.dynamic.CheckResult<I>>;
}

/** A provider that forwards every method to the module at `implFile` (absolute path). */
export function delegatingProvider(implFile: string): pulumi.dynamic.ResourceProvider {
  const relFile = path.relative(process.cwd(), implFile);
  const relLoader = path.relative(process.cwd(), path.join(__dirname, "..", "ts", "require.js"));
  // These functions are serialized: they may refer only to `relFile`, `relLoader` and to each
  // other.
  const load = (): ProviderImpl<unknown, unknown> => {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const { resolve } = require("node:path") as typeof path;
    const file = resolve(process.cwd(), relFile);
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    if (!(require("node:fs") as typeof import("node:fs")).existsSync(file)) {
      throw new Error(
        `sparkform provider module ${relFile} is not under ${process.cwd()}: ` +
          "run pulumi in the project directory of a sparkform checkout (the one with Pulumi.yaml)",
      );
    }
    // Only `.ts` is hooked, so node loads every .js itself (execa, an ES module, through its
    // own require(esm)). Each resource's outputs keep this path for refresh and destroy: the
    // loader stays at components/ts/require.js.
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    (require(resolve(process.cwd(), relLoader)) as { register(): void }).register();
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    const mod = require(file) as ProviderImpl<unknown, unknown> & {
      provider?: ProviderImpl<unknown, unknown>;
    };
    // `provider` when the module has one; else its named exports (an older module).
    return mod.provider ?? mod;
  };
  const missing = (method: string) =>
    new Error(`${relFile} does not implement ${method}; this is a sparkform bug`);
  return {
    create: async (inputs) => load().create(inputs),
    read: async (id, props) => {
      const impl = load();
      return impl.read ? impl.read(id, props) : { id, props };
    },
    diff: async (id, olds, news) => {
      const impl = load();
      return impl.diff ? impl.diff(id, olds, news) : {};
    },
    update: async (id, olds, news) => {
      const impl = load();
      if (!impl.update) throw missing("update");
      return impl.update(id, olds, news);
    },
    delete: async (id, props) => {
      const impl = load();
      if (impl.delete) await impl.delete(id, props);
    },
    check: async (olds, news) => {
      const impl = load();
      return impl.check ? impl.check(olds, news) : { inputs: news };
    },
  };
}
