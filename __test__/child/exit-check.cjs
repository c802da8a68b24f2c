// Runs one kind of call, then lets the event loop drain: the process must exit by itself.
const { LcmEngine, migrate } = require('../../index.js')

const [, , mode, dbPath] = process.argv

async function main() {
  if (mode === 'migrate') {
    await migrate(dbPath)
    return
  }
  const engine = await LcmEngine.open({ dbPath })
  if (mode === 'ingest') {
    await engine.ingest({ sessionId: 's' }, [{ role: 'user', content: 'hello' }])
    await engine.messages(1)
  }
  if (mode === 'error') {
    await engine.ingest({ conversationId: 999 }, [{ role: 'user', content: 'x' }]).catch(() => {})
  }
  if (mode !== 'no-close') await engine.close()
}

main().then(
  () => console.log('done'),
  (err) => {
    console.error(err)
    process.exitCode = 1
  },
)
