// Every operation that walks the summary DAG, on a copy of head-theme.db whose summary_parents
// holds a cycle (a depth-2 summary made an input of one of its own inputs). Prints one JSON
// line per operation: {op, ok, code?, ms, problems?}. A walk that loops forever never prints.
const { execFileSync } = require('node:child_process')
const { copyFileSync, mkdtempSync, rmSync } = require('node:fs')
const { tmpdir } = require('node:os')
const { join } = require('node:path')
const { LcmEngine } = require('../../index.js')

const [, , fixture] = process.argv
const dir = mkdtempSync(join(tmpdir(), 'lcm-cycle-'))
process.on('exit', () => rmSync(dir, { recursive: true, force: true }))
const db = join(dir, 'lcm.db')
copyFileSync(fixture, db)
const sql = (q) => JSON.parse(execFileSync('python3', ['-c', 'import sqlite3,sys,json; c=sqlite3.connect(sys.argv[1]); r=c.execute(sys.argv[2]).fetchall(); c.commit(); print(json.dumps(r))', db, q]).toString())

;(async () => {
  await (await LcmEngine.open({ dbPath: db })).close()
  const [[top, input]] = sql("SELECT p.summary_id, p.parent_summary_id FROM summary_parents p JOIN summaries s ON s.summary_id = p.summary_id WHERE s.depth = 2 ORDER BY 1 LIMIT 1")
  sql(`INSERT INTO summary_parents (summary_id, parent_summary_id, ordinal) VALUES ('${input}', '${top}', 99)`)
  // Make the migration's backfills walk the graph again.
  sql("DELETE FROM lcm_migration_state WHERE step_name IN ('backfillSummaryDepths', 'backfillSummaryMetadata')")
  const ops = {
    open: (e) => e.migration,
    verify: (e) => e.verify(1),
    describe: (e) => e.describe(top),
    describeInput: (e) => e.describe(input),
    expand: (e) => e.expand(top, { tokenBudget: 1e9 }),
    rewriteAll: (e) => e.rewrite(1, 'offline', { all: true }),
    rewriteOne: (e) => e.rewrite(1, 'offline', { summaryId: top }),
    assemble: (e) => e.assemble(1, { tokenBudget: 100000 }),
    grep: (e) => e.grep(1, { query: 'theme' }),
    condensedPass: (e) => e.condensedPass(1, 'offline', { hardTrigger: true }),
    compact: (e) => e.compact(1, 'offline', { tokenBudget: 1000, force: true }),
  }
  const engine = await LcmEngine.open({ dbPath: db })
  for (const [op, run] of Object.entries(ops)) {
    const started = Date.now()
    try {
      const r = await run(engine)
      console.log(JSON.stringify({ op, ok: true, ms: Date.now() - started, problems: r && r.problems }))
    } catch (err) {
      console.log(JSON.stringify({ op, ok: false, code: err.code, ms: Date.now() - started }))
    }
  }
  await engine.close()
})()
