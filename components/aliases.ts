// Aliases that keep stacks made before the stage layout: their resources were direct children
// of SparkCluster with the SDK's generic dynamic type. Without these, `up` would see new URNs
// and replace — and a replace runs delete, which removes synced trees, builds and models.
import type * as pulumi from "@pulumi/pulumi";
import { LEGACY_TYPE, TYPE_MODULE } from "./kinds";

/** The type every sparkform dynamic resource had before it carried its own (kinds.ts). */
export const LEGACY_DYNAMIC_TYPE = LEGACY_TYPE;

/** sparkform's dynamic resources are `pulumi-nodejs:dynamic/sparkform:<Kind>` (kinds.ts). */
export const DYNAMIC_MODULE = TYPE_MODULE;

/** Where a stage's per-node resources lived before the stage layout. */
export interface PreStageLayout {
  /** The SparkCluster that created them directly. */
  readonly parent: pulumi.Resource;
  /** They were named `<prefix>-<node>`. */
  readonly prefix: string;
}

/** The aliases of a stage's resource for `node`: its pre-stage type, parent and name. */
export function preStageAliases(layout: PreStageLayout | undefined, node: string): pulumi.Alias[] {
  return layout
    ? [{ type: LEGACY_DYNAMIC_TYPE, parent: layout.parent, name: `${layout.prefix}-${node}` }]
    : [];
}

/** For a dynamic resource whose parent and name stayed and only the type changed. */
export const legacyTypeAliases: readonly pulumi.Alias[] = [{ type: LEGACY_DYNAMIC_TYPE }];
