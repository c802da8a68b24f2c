// Opens an engine on argv[2] (extra options as JSON in argv[3]), counts its conversations, and
// prints {"ok":true,"conversations":N} or {"code","message"} as JSON.
const { LcmEngine } = require('../../index.js')

LcmEngine.open({ dbPath: process.argv[2], ...JSON.parse(process.argv[3] ?? '{}') })
  .then(async (engine) => {
    try {
      const conversations = (await engine.conversations()).length
      console.log(JSON.stringify({ ok: true, conversations }))
    } finally {
      await engine.close()
    }
  })
  .catch((err) => console.log(JSON.stringify({ code: err.code, message: err.message })))
