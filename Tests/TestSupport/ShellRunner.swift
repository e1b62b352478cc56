// Runs an outside program (bash, zsh, fish, groff, sh) for tests of generated scripts and pages.

import Foundation

/// The result of one run of an outside program.
public struct ShellRun: Sendable {
  public var status: Int32
  public var out: String
  public var err: String
}

/// The absolute path of `program` on PATH (or in /usr/bin), or `nil` when it is not installed.
public func installedProgram(_ program: String) -> String? {
  let directories =
    (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
    + ["/usr/bin", "/bin"]
  return directories.map { $0 + "/" + program }.first {
    FileManager.default.isExecutableFile(atPath: $0)
  }
}

/// Writes `text` to a fresh temporary file named `name` and returns its path.
public func temporaryFile(_ name: String, _ text: String) throws -> String {
  let directory = FileManager.default.temporaryDirectory
    .appendingPathComponent("argparse-\(UUID().uuidString)")
  try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true)
  let file = directory.appendingPathComponent(name)
  try text.write(to: file, atomically: true, encoding: .utf8)
  return file.path
}

/// Runs `program` with `arguments`, standard input closed; waits for it (bounded by the
/// program's own work: these are syntax checks and short completion runs).
public func runProgram(
  _ program: String, _ arguments: [String], environment: [String: String]? = nil
) throws -> ShellRun {
  let process = Process()
  process.executableURL = URL(fileURLWithPath: program)
  process.arguments = arguments
  if let environment { process.environment = environment }
  let run = try runCapturing(process)
  return ShellRun(status: run.status, out: run.output, err: run.error)
}
