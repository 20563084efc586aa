// The tests' PostgreSQL server: shared with the benches, so it lives in sim/world/.
export * from "../../sim/world/postgres";
