// The sparkform program: one SparkCluster per stack, configured from stacks/Pulumi.<stack>.yaml.
// Components land here as their issues do (nodes, toolchain, tree sync, build, model, workers).
export {};
