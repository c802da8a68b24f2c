// Prints one plain `N passed, N failed` line at the end of a vitest run, the form CI counts.
export default class CountReporter {
  onTestRunEnd(testModules, unhandledErrors) {
    let passed = 0
    let failed = 0
    for (const mod of testModules) {
      for (const test of mod.children.allTests()) {
        const state = test.result().state
        if (state === 'passed') passed++
        else if (state === 'failed') failed++
      }
      if (mod.state() === 'failed' && [...mod.children.allTests()].length === 0) failed++
    }
    failed += unhandledErrors.length
    console.log(`vitest: ${passed} passed, ${failed} failed`)
  }
}
