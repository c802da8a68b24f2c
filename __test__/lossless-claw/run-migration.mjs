#!/usr/bin/env node
// Run the real lossless-claw schema migration (runLcmMigrations) against a SQLite file
// and report the resulting schema as JSON. Exit code 0 = ok, 1 = migration/check error,
// 2 = usage error.
//
// Usage:
//   node --experimental-transform-types run.mjs <db-path> [--src <lossless-claw checkout>]
//        [--bundle <esbuild bundle exporting the same names>] [--keep-wal] [--no-store]
//        [--replace-first]
//
// --replace-first: after reading, each conversation's first context item is replaced by
// itself through the plugin's own replaceContextRangeWithSummary (when it is a summary), which
// renumbers the conversation's ordinals from 0 when they do not start there.
//
// The lossless-claw code comes either from its TypeScript sources (a checkout of
// Martian-Engineering/lossless-claw; default $LC_SRC) loaded through Node's own type
// stripping, or from a prebuilt ESM bundle (--bundle / $LC_BUNDLE). lossless-claw is not on
// the npm registry, so nothing here downloads it: __test__/lossless-claw.spec.ts runs this
// only where a checkout exists (see __test__/lossless-claw/README.md).
import { readFileSync, existsSync } from "node:fs";
import { resolve, join } from "node:path";
import { pathToFileURL } from "node:url";
import module from "node:module";

function parseArgs(argv) {
  const out = { db: null, src: process.env.LC_SRC ?? null, bundle: process.env.LC_BUNDLE ?? null,
    keepWal: false, store: true, replaceFirst: false };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i];
    if (a === "--src") out.src = argv[++i];
    else if (a === "--bundle") out.bundle = argv[++i];
    else if (a === "--keep-wal") out.keepWal = true;
    else if (a === "--no-store") out.store = false;
    else if (a === "--replace-first") out.replaceFirst = true;
    else if (!out.db) out.db = a;
    else throw new Error(`unexpected argument: ${a}`);
  }
  return out;
}

let args;
try {
  args = parseArgs(process.argv.slice(2));
  if (!args.db) throw new Error("missing <db-path>");
  if (!args.bundle && !args.src) throw new Error("need --src <lossless-claw checkout> or --bundle <file> (or $LC_SRC / $LC_BUNDLE)");
} catch (e) {
  process.stderr.write(`run.mjs: ${e.message}\n`);
  process.exit(2);
}

// lossless-claw's TS sources import siblings as "./x.js" (NodeNext style). Node's type
// stripping does not rewrite those, so fall back to "./x.ts" when the .js file is absent.
async function loadLcm() {
  if (args.bundle) {
    const m = await import(pathToFileURL(resolve(args.bundle)).href);
    return { migration: m, connection: m, features: m, store: m };
  }
  const src = resolve(args.src);
  // registerHooks is newer than the @types/node this repository pins.
  /** @type {any} */ (module).registerHooks({
    resolve(specifier, context, nextResolve) {
      try {
        return nextResolve(specifier, context);
      } catch (err) {
        if (err?.code === "ERR_MODULE_NOT_FOUND" && /^\.\.?\//.test(specifier) && specifier.endsWith(".js")) {
          return nextResolve(specifier.slice(0, -3) + ".ts", context);
        }
        throw err;
      }
    },
  });
  const imp = (p) => import(pathToFileURL(join(src, p)).href);
  return {
    migration: await imp("src/db/migration.ts"),
    connection: await imp("src/db/connection.ts"),
    features: await imp("src/db/features.ts"),
    store: args.store ? await imp("src/store/index.ts") : null,
  };
}

function sqliteHeaderJournalMode(path) {
  // Bytes 18/19 of the SQLite header: 1 = legacy rollback journal, 2 = WAL.
  try {
    const buf = readFileSync(path).subarray(0, 20);
    if (buf.length < 20) return null;
    return buf[18] === 2 ? "wal" : "legacy";
  } catch {
    return null;
  }
}

// The migration logs one info line per step; keep the first run's step outcomes compact and
// every warn/error line verbatim.
function summarizeLogs(all, firstRunCount) {
  const steps = { complete: 0, skipped: [], other: [] };
  for (const l of all.slice(0, firstRunCount).filter((l) => l.level === "info")) {
    if (/migration step complete/.test(l.msg)) steps.complete++;
    else if (/migration step skipped/.test(l.msg)) steps.skipped.push(l.msg.replace(/^\[lcm\] migration step skipped: /, ""));
    else steps.other.push(l.msg);
  }
  return { firstRunSteps: steps, warnings: all.filter((l) => l.level === "warn").map((l) => l.msg),
    errors: all.filter((l) => l.level === "error").map((l) => l.msg) };
}

function schemaSnapshot(db) {
  return db.prepare(
    "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE name NOT LIKE 'sqlite_%' ORDER BY type, name",
  ).all().map((r) => ({ ...r }));
}

const report = { ok: false, db: resolve(args.db), source: args.bundle ? { bundle: resolve(args.bundle) } : { src: resolve(args.src) } };
const logs = [];
const log = Object.fromEntries(["debug", "info", "warn", "error"].map((lvl) => [lvl, (msg) => logs.push({ level: lvl, msg: String(msg) })]));
let db;
let exitCode = 1;
try {
  if (!existsSync(args.db)) throw new Error(`database file not found: ${args.db}`);
  const headerMode = sqliteHeaderJournalMode(args.db);
  const lcm = await loadLcm();
  report.nodeVersion = process.version;

  // Open exactly as the plugin does (WAL, foreign_keys=ON, busy_timeout, ...).
  db = lcm.connection.createLcmDatabaseConnection(args.db);
  report.sqliteVersion = db.prepare("SELECT sqlite_version() AS v").get().v;
  report.features = { ...lcm.features.getLcmDbFeatures(db) };

  const before = schemaSnapshot(db);
  const t0 = performance.now();
  lcm.migration.runLcmMigrations(db, { log });
  report.migrationMs = Math.round(performance.now() - t0);
  const firstRunLogCount = logs.length;
  const afterFirst = schemaSnapshot(db);
  // Idempotence: a second run (as on every plugin start) must not change the schema.
  lcm.migration.runLcmMigrations(db, { log });
  const afterSecond = schemaSnapshot(db);

  const key = (o) => `${o.type}:${o.name}`;
  const beforeMap = new Map(before.map((o) => [key(o), o.sql]));
  const firstMap = new Map(afterFirst.map((o) => [key(o), o.sql]));
  report.schemaChanges = {
    added: afterFirst.filter((o) => !beforeMap.has(key(o))).map(key),
    removed: before.filter((o) => !firstMap.has(key(o))).map(key),
    altered: afterFirst.filter((o) => beforeMap.has(key(o)) && beforeMap.get(key(o)) !== o.sql).map(key),
  };
  report.idempotent = JSON.stringify(afterFirst) === JSON.stringify(afterSecond);

  report.tables = db.prepare("SELECT name FROM sqlite_master WHERE type='table' ORDER BY name").all().map((r) => r.name);
  const cols = db.prepare("PRAGMA table_info(summaries)").all();
  report.summariesColumns = cols.map((c) => c.name);
  report.summariesColumnDecls = cols.map((c) =>
    [c.name, c.type, c.pk ? "PRIMARY KEY" : "", c.notnull ? "NOT NULL" : "", c.dflt_value != null ? `DEFAULT ${c.dflt_value}` : ""]
      .filter(Boolean).join(" "));
  report.integrityCheck = db.prepare("PRAGMA integrity_check").all().map((r) => r.integrity_check);
  report.foreignKeyViolations = db.prepare("PRAGMA foreign_key_check").all().length;
  report.counts = Object.fromEntries(["conversations", "messages", "summaries", "context_items"]
    .filter((t) => report.tables.includes(t))
    .map((t) => [t, db.prepare(`SELECT COUNT(*) AS n FROM "${t}"`).get().n]));

  // Read back through the plugin's own store classes.
  if (lcm.store) {
    const ss = new lcm.store.SummaryStore(db, { fts5Available: report.features.fts5Available });
    const cs = new lcm.store.ConversationStore(db, { fts5Available: report.features.fts5Available });
    const convs = db.prepare("SELECT conversation_id FROM conversations ORDER BY conversation_id").all();
    const storeRead = { conversations: [] };
    for (const { conversation_id: cid } of convs) {
      const conv = await cs.getConversation(cid);
      const sums = await ss.getSummariesByConversation(cid);
      const items = await ss.getContextItems(cid);
      const maxDepth = await ss.getConversationMaxSummaryDepth(cid);
      const ctxTokens = await ss.getContextTokenCount(cid);
      const read = {
        conversationId: cid, sessionId: conv?.sessionId, summaries: sums.length, maxDepth,
        contextItems: items.length, contextTokenCount: ctxTokens, firstOrdinal: items[0]?.ordinal ?? null,
      };
      if (args.replaceFirst && items[0]?.itemType === "summary") {
        const first = items[0].ordinal;
        await ss.replaceContextRangeWithSummary({ conversationId: cid, startOrdinal: first, endOrdinal: first, summaryId: items[0].summaryId });
        const now = await ss.getContextItems(cid);
        read.afterReplace = { firstOrdinal: now[0]?.ordinal ?? null, lastOrdinal: now.at(-1)?.ordinal ?? null, contextItems: now.length };
      }
      storeRead.conversations.push(read);
      if (!storeRead.sampleSummary && sums.length) {
        const s = await ss.getSummary(sums[0].summaryId);
        storeRead.sampleSummary = { summaryId: s.summaryId, kind: s.kind, depth: s.depth, tokenCount: s.tokenCount,
          contentHead: s.content.slice(0, 60) };
      }
    }
    report.storeRead = storeRead;
  }

  report.logs = summarizeLogs(logs, firstRunLogCount);
  if (report.integrityCheck.join() !== "ok") throw new Error(`integrity_check: ${report.integrityCheck.join("; ")}`);
  if (report.foreignKeyViolations) throw new Error(`foreign_key_check: ${report.foreignKeyViolations} violation(s)`);
  if (!report.idempotent) throw new Error("second runLcmMigrations changed the schema");
  if (logs.some((l) => l.level === "error")) throw new Error("migration logged an error");

  // Leave the file self-contained as it came (the plugin switches it to WAL on open).
  if (!args.keepWal && headerMode === "legacy") {
    db.exec("PRAGMA wal_checkpoint(TRUNCATE)");
    db.exec("PRAGMA journal_mode = DELETE");
  }
  report.ok = true;
  exitCode = 0;
} catch (err) {
  report.ok = false;
  report.error = err instanceof Error ? `${err.name}: ${err.message}` : String(err);
  if (err?.code) report.errorCode = err.code;
  report.logs ??= summarizeLogs(logs, logs.length);
} finally {
  try { db?.close(); } catch { /* ignore */ }
}
process.stdout.write(JSON.stringify(report, null, 2) + "\n");
process.exit(exitCode);
