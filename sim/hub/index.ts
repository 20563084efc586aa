export * from "./server";
export * from "./repo";
