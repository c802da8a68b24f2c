// Opens an engine on argv[2] and prints {"ok":true} or {"code","message"} as JSON.
const { LcmEngine } = require('../../index.js')

LcmEngine.open({ dbPath: process.argv[2] }).then(
  async (engine) => {
    await engine.close()
    console.log(JSON.stringify({ ok: true }))
  },
  (err) => console.log(JSON.stringify({ code: err.code, message: err.message })),
)
