// Finds the `blekit` executable the build put next to the test runner.
import Foundation

/// The `blekit` executable in the test runner's build directory, if there is one.
public let builtBlekit: URL? = {
  let runner = URL(fileURLWithPath: CommandLine.arguments[0]).resolvingSymlinksInPath()
  var directory = runner.deletingLastPathComponent()
  // The runner may sit inside a bundle directory (`*.xctest/...`); look a few levels up.
  for _ in 0..<4 {
    let candidate = directory.appendingPathComponent("blekit")
    if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate }
    directory = directory.deletingLastPathComponent()
  }
  return nil
}()
