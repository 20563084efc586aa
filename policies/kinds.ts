// How policies find sparkform's resources: every sparkform dynamic resource has the type
// pulumi-nodejs:dynamic:Resource and says what it is in a `kind` property.
export const DYNAMIC_TYPE = "pulumi-nodejs:dynamic:Resource";

export type SparkformKind =
  "SparkNode" | "Toolchain" | "TreeSync" | "NativeBuild" | "ModelReplica" | "FileDigest";

export function kindOf(type: string, props: Record<string, unknown>): string | undefined {
  return type === DYNAMIC_TYPE && typeof props.kind === "string" ? props.kind : undefined;
}
