// verify.mjs replays a Delta table's _delta_log with DuckDB, independently of
// the Go code that wrote it, and prints what a Delta reader sees as JSON:
//
//   {"version": N, "txns": {"<appId>": version, ...}, "columns": [...], "files": [...], "rows": [[...], ...]}
//
// Usage: node verify.mjs TABLE_DIR [--every-version]. The DuckDB package is
// found through DUCKDB_NODE_MODULES (the node_modules folder hack/tools.sh
// duckdb fills).
//
// The log is read with DuckDB alone: _last_checkpoint and the Parquet
// checkpoint with read_json_objects/read_parquet, the commits after it with
// read_ndjson_objects, and the active data files with read_parquet; partition
// values come from the log, as the protocol says. Values are printed as
// strings (timestamps as microseconds since the epoch) so the caller
// compares them exactly. With --every-version the log is replayed from
// commit 0 (no checkpoint) and one line is printed per version, as time
// travel to that version reads it.
import { createRequire } from 'node:module';
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';

const modules = process.env.DUCKDB_NODE_MODULES;
if (!modules) throw new Error('DUCKDB_NODE_MODULES is not set');
const require = createRequire(join(modules, 'noop.js'));
const { DuckDBInstance } = require('@duckdb/node-api');

const table = process.argv[2];
const everyVersion = process.argv[3] === '--every-version';
const log = join(table, '_delta_log');
const q = (s) => "'" + String(s).replaceAll("'", "''") + "'";

const db = await DuckDBInstance.create(':memory:');
const con = await db.connect();
const rows = async (sql) => (await con.runAndReadAll(sql)).getRowObjectsJson();

// State: active files by path, txns, schema and partition columns.
const files = new Map();
const txns = {};
let schemaString = null;
let partitionColumns = [];
let start = 0;
let version = -1;

const lastPath = join(log, '_last_checkpoint');
if (!everyVersion && existsSync(lastPath)) {
  const [last] = await rows(`SELECT json->>'$.version' AS v FROM read_json_objects(${q(lastPath)})`);
  const cp = Number(last.v);
  const cpFile = join(log, String(cp).padStart(20, '0') + '.checkpoint.parquet');
  for (const r of await rows(`SELECT add.path AS path, to_json(add.partitionValues) AS pv,
      txn.appId AS app, txn.version AS tv, metaData.schemaString AS schema,
      to_json(metaData.partitionColumns) AS pcols FROM read_parquet(${q(cpFile)})`)) {
    if (r.path != null) files.set(decodeURIComponent(r.path), JSON.parse(r.pv ?? '{}'));
    if (r.app != null) txns[r.app] = Number(r.tv);
    if (r.schema != null) { schemaString = r.schema; partitionColumns = JSON.parse(r.pcols ?? '[]'); }
  }
  start = cp + 1;
  version = cp;
}

const commits = readdirSync(log).filter((f) => /^\d{20}\.json$/.test(f))
  .map((f) => Number(f.slice(0, 20))).filter((v) => v >= start).sort((a, b) => a - b);
for (const v of commits) {
  if (v !== version + 1) throw new Error(`commit ${version + 1} is missing before ${v}`);
  version = v;
  const file = join(log, String(v).padStart(20, '0') + '.json');
  for (const r of await rows(`SELECT json->>'$.add.path' AS add, json->'$.add.partitionValues' AS pv,
      json->>'$.remove.path' AS remove, json->>'$.txn.appId' AS app, json->>'$.txn.version' AS tv,
      json->>'$.metaData.schemaString' AS schema, json->'$.metaData.partitionColumns' AS pcols
      FROM read_ndjson_objects(${q(file)})`)) {
    if (r.add != null) files.set(decodeURIComponent(r.add), JSON.parse(r.pv ?? '{}'));
    if (r.remove != null) files.delete(decodeURIComponent(r.remove));
    if (r.app != null) txns[r.app] = Number(r.tv);
    if (r.schema != null) { schemaString = r.schema; partitionColumns = JSON.parse(r.pcols ?? '[]'); }
  }
  if (everyVersion) process.stdout.write(await view());
}

async function view() {
  const columns = schemaString ? JSON.parse(schemaString).fields.map((f) => ({ name: f.name, type: f.type })) : [];
  const duckType = { string: 'VARCHAR', long: 'BIGINT', double: 'DOUBLE', boolean: 'BOOLEAN', timestamp: 'TIMESTAMPTZ' };
  const ident = (s) => '"' + s.replaceAll('"', '""') + '"';
  const render = (c) => c.type === 'timestamp'
    ? `CAST(epoch_us(${ident(c.name)}) AS VARCHAR)`
    : `CAST(${ident(c.name)} AS VARCHAR)`;

  let out = [];
  if (files.size > 0) {
    const parts = [...files.entries()].sort(([a], [b]) => (a < b ? -1 : 1)).map(([path, pv]) => {
      const consts = partitionColumns.map((p) => {
        const c = columns.find((x) => x.name === p);
        const v = pv[p];
        return `CAST(${v == null ? 'NULL' : q(v)} AS ${duckType[c.type]}) AS ${ident(p)}`;
      });
      return `SELECT *${consts.length ? ', ' + consts.join(', ') : ''} FROM read_parquet(${q(join(table, path))}, hive_partitioning = false)`;
    });
    // Files written before a column was added lack it: BY NAME fills nulls.
    // The empty first part gives every column its type even if no file has it.
    const typed = columns.map((c) => `CAST(NULL AS ${duckType[c.type]}) AS ${ident(c.name)}`).join(', ');
    const union = [`SELECT ${typed} WHERE false`, ...parts].join(' UNION ALL BY NAME ');
    const sel = columns.map((c) => `${render(c)} AS ${ident(c.name)}`).join(', ');
    out = (await rows(`SELECT ${sel} FROM (${union})`)).map((r) => columns.map((c) => r[c.name]));
  }
  return JSON.stringify({ version, txns, columns, files: [...files.keys()].sort(), rows: out }) + '\n';
}

if (!everyVersion) process.stdout.write(await view());
