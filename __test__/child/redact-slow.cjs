// Redacts `pattern` with a summarizer that answers slowly, printing "progress" before each
// summary it regenerates, so that the parent can kill it mid-run.
const { LcmEngine } = require('../../index.js')

const [, , dbPath, pattern] = process.argv

async function main() {
  const engine = await LcmEngine.open({ dbPath })
  /** @param {string} _prompt @param {{ depth: number }} request */
  const slow = async (_prompt, request) => {
    await new Promise((resolve) => setTimeout(resolve, 400))
    return `Regenerated d${request.depth}.\nExpand for details about: nothing`
  }
  await engine.redact({ pattern, onProgress: () => console.log('progress') }, slow)
  console.log('done')
}

main().catch((e) => {
  console.error(e)
  process.exit(1)
})
