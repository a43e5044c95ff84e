/**
 * The version of every result object the engine returns (simulate, max-batch, advice, replay). A stored result
 * (SQLite, a `--json` file) carries it as `schema_version`; bump it when a field changes meaning or goes away
 * (adding an optional field does not need a bump).
 */
export const RESULT_SCHEMA_VERSION = 1;
