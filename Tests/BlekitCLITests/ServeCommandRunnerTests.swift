// serve's per-read commands and file values against commands and files that do not behave: a
// command that hangs, one that ignores SIGTERM and leaves a child behind, one that writes
// forever, more commands than may run at once, and a FIFO as a file value or a profile.
import BLEKit
import Dispatch
import Foundation
import Testing

@testable import blekit

#if canImport(Glibc)
  import Glibc
#endif

@Suite(.serialized, .timeLimit(.minutes(1))) struct ServeCommandRunnerTests {
  /// Runs `body`, failing the test when it has not returned after `limit` (the work is left
  /// running: a runner without limits would otherwise hold the test until its time limit).
  static func within<T: Sendable>(
    _ limit: Duration, _ body: @escaping @Sendable () async throws -> T
  ) async throws -> T? {
    try await withThrowingTaskGroup(of: T?.self) { group in
      group.addTask { try await body() }
      group.addTask {
        try await Task.sleep(for: limit)
        return nil
      }
      defer { group.cancelAll() }
      let first = try await group.next() ?? nil
      if first == nil { Issue.record("still running after \(limit)") }
      return first
    }
  }

  /// What `runner` made of `command`: its error's text, or "returned a value"; nil (and an
  /// issue recorded) when it had not ended within `limit`.
  static func outcome(
    of command: String, on runner: ServeCommandRunner, within limit: Duration = .seconds(15)
  ) async throws -> String? {
    try await within(limit) { () async -> String in
      do {
        _ = try await runner.run(command, limit: 512)
        return "returned a value"
      } catch {
        return "\(error)"
      }
    }
  }

  static func temporaryDirectory() throws -> String {
    var template = Array("/tmp/blekit-serve-XXXXXX".utf8CString)
    let made = template.withUnsafeMutableBufferPointer { mkdtemp($0.baseAddress!) }
    try #require(made != nil)
    return String(cString: template)
  }

  /// Whether a process `pid` exists (a zombie counts as gone: kill succeeds on it, so look at
  /// its state).
  static func alive(_ pid: pid_t) -> Bool {
    guard let status = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8) else {
      return false
    }
    let state = status.split(separator: ")").last?.split(separator: " ").first
    return state != "Z"
  }

  /// The processes of `pids` still alive after `limit` (SIGKILL is delivered, not waited for:
  /// a killed process may take a moment to be scheduled and exit).
  static func survivors(_ pids: [pid_t], after limit: Duration = .seconds(3)) async -> [pid_t] {
    let start = ContinuousClock.now
    var left = pids.filter(alive)
    while !left.isEmpty && ContinuousClock.now - start < limit {
      try? await Task.sleep(for: .milliseconds(20))
      left = left.filter(alive)
    }
    return left
  }

  static func pids(in file: String) throws -> [pid_t] {
    try String(contentsOfFile: file, encoding: .utf8).split(whereSeparator: \.isWhitespace)
      .compactMap { pid_t($0) }
  }

  @Test func aCommandThatHangsIsStoppedAtItsTimeoutWithItsGroup() async throws {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(1))
    let start = ContinuousClock.now
    let outcome = try await Self.outcome(
      of: "sleep 60 & echo $$ $! > \(directory)/pids; wait", on: runner)
    let took = ContinuousClock.now - start
    #expect(outcome?.contains("did not finish within 1 s") == true, "\(outcome ?? "")")
    #expect(took < .seconds(5))
    let pids = try Self.pids(in: "\(directory)/pids")
    #expect(pids.count == 2)
    #expect(await Self.survivors(pids).isEmpty, "outlived the timeout")
    #expect(ChildProcessGroups.count == 0)
  }

  /// Whether process `pid` is gone altogether: exited and reaped (no zombie left).
  static func reaped(_ pid: pid_t) -> Bool { access("/proc/\(pid)", F_OK) != 0 }

  @Test func aCommandThatExitsAtOnceIsAnsweredAtOnceAndReaped() async throws {
    let runner = ServeCommandRunner(timeout: .seconds(10))
    let start = ContinuousClock.now
    let value = try await Self.within(.seconds(15)) {
      try await runner.run("echo $$", limit: 512)
    }
    let took = ContinuousClock.now - start
    let pid = try #require(value.flatMap { pid_t(String(decoding: $0, as: UTF8.self)) })
    // Its exit is seen when it happens, not at the 10 s limit.
    #expect(took < .seconds(2), "took \(took)")
    #expect(Self.reaped(pid), "\(pid) left unreaped")
    #expect(ChildProcessGroups.count == 0)
    let failing = try await Self.outcome(of: "exit 3", on: runner)
    #expect(failing == "'exit 3' exited with status 3")
    #expect(ContinuousClock.now - start < .seconds(4))
  }

  @Test func aCommandThatClosesItsOutputAndStaysIsStoppedAtTheDeadlineWithItsGroup()
    async throws
  {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(1))
    let start = ContinuousClock.now
    let outcome = try await Self.outcome(
      of: "exec >&-; sleep 60 & echo $$ $! > \(directory)/pids; wait", on: runner)
    let took = ContinuousClock.now - start
    #expect(
      outcome == "'exec >&-; sleep 60 & echo $$ $! > \(directory)/pids; wait' did not finish "
        + "within 1 s; its process group was stopped")
    // The end of its output is not its end: it is waited for until the limit, not past it
    // (SIGTERM ends both at once).
    #expect(took >= .seconds(1) && took < .seconds(3), "took \(took)")
    let pids = try Self.pids(in: "\(directory)/pids")
    #expect(pids.count == 2)
    #expect(await Self.survivors(pids).isEmpty, "outlived the timeout")
    #expect(pids.first.map(Self.reaped) == true)
    #expect(ChildProcessGroups.count == 0)
  }

  @Test func aCommandThatClosesItsOutputAndIgnoresSIGTERMIsKilledAfterTheGrace() async throws {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(1))
    let start = ContinuousClock.now
    let outcome = try await Self.outcome(
      of: "trap '' TERM; exec >&-; echo $$ > \(directory)/pids; while :; do sleep 1; done",
      on: runner)
    let took = ContinuousClock.now - start
    #expect(outcome?.hasSuffix("did not finish within 1 s; its process group was stopped") == true)
    // 1 s limit, then SIGTERM (ignored), then SIGKILL after the 500 ms grace.
    let least = .seconds(1) + ServeCommandRunner.stopGrace
    #expect(took >= least && took < least + .seconds(2), "took \(took)")
    let pids = try Self.pids(in: "\(directory)/pids")
    #expect(await Self.survivors(pids).isEmpty)
    #expect(pids.first.map(Self.reaped) == true)
    #expect(ChildProcessGroups.count == 0)
  }

  @Test func aCommandThatWritesForeverAndIgnoresSIGTERMIsCappedThenKilled() async throws {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(20))
    let start = ContinuousClock.now
    let value = try await Self.within(.seconds(15)) {
      try await runner.run(
        "trap '' TERM PIPE; echo $$ > \(directory)/pids; "
          + "while :; do yes 0123456789 2>/dev/null; done", limit: 100)
    }
    let took = ContinuousClock.now - start
    // 100 bytes: nine lines of 11 and the next line's "0". The group ignores SIGTERM and goes
    // on (a new writer at each broken pipe): it is killed after the grace.
    #expect(value == Array(String(repeating: "0123456789\n", count: 9).utf8) + [0x30])
    #expect(took >= ServeCommandRunner.stopGrace && took < .seconds(5), "took \(took)")
    let pids = try Self.pids(in: "\(directory)/pids")
    #expect(await Self.survivors(pids).isEmpty)
    #expect(pids.first.map(Self.reaped) == true)
    #expect(ChildProcessGroups.count == 0)
  }

  @Test func aHangingCommandEndsInAnErrorAtTheTenSecondLimit() async throws {
    let directory = try Self.temporaryDirectory()
    let start = ContinuousClock.now
    let outcome = try await Self.outcome(
      of: "echo $$ > \(directory)/pids; sleep 60", on: ServeCommandRunner(), within: .seconds(20))
    let took = ContinuousClock.now - start
    #expect(outcome?.hasSuffix("did not finish within 10 s; its process group was stopped") == true)
    #expect(took >= .seconds(10) && took < .seconds(12), "took \(took)")
    let pids = try Self.pids(in: "\(directory)/pids")
    #expect(await Self.survivors(pids).isEmpty)
    #expect(ChildProcessGroups.count == 0)
  }

  /// Every admitted command runs at once, however few threads the process has: a wait holds
  /// none (a runner blocking a Dispatch thread per command ran two at a time on two cores).
  @Test func asManyCommandsAsAdmittedRunAtOnce() async throws {
    let runner = ServeCommandRunner(timeout: .seconds(10), concurrency: 4)
    let start = ContinuousClock.now
    let values = try await Self.within(.seconds(15)) {
      try await withThrowingTaskGroup(of: [UInt8].self) { group in
        for _ in 0..<4 { group.addTask { try await runner.run("sleep 1; echo done", limit: 16) } }
        return try await group.reduce(into: [[UInt8]]()) { $0.append($1) }
      }
    }
    let took = ContinuousClock.now - start
    #expect(values == Array(repeating: Array("done".utf8), count: 4))
    #expect(took < .milliseconds(1800), "took \(took)")
  }

  @Test func aCommandThatIgnoresSIGTERMIsKilled() async throws {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(1))
    let outcome = try await Self.outcome(
      of: "trap '' TERM; echo $$ > \(directory)/pids; while :; do sleep 1; done", on: runner)
    #expect(outcome?.contains("did not finish") == true, "\(outcome ?? "")")
    #expect(await Self.survivors(try Self.pids(in: "\(directory)/pids")).isEmpty)
  }

  @Test func aCommandThatWritesForeverIsCutAtTheValueLength() async throws {
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(20))
    let start = ContinuousClock.now
    let value = try await Self.within(.seconds(15)) {
      try await runner.run("echo $$ > \(directory)/pids; trap '' PIPE; yes 012345678", limit: 512)
    }
    #expect(ContinuousClock.now - start < .seconds(5))
    #expect(value?.count == 512)
    #expect(value?.suffix(3) == Array("\n01".utf8)[...])
    #expect(await Self.survivors(try Self.pids(in: "\(directory)/pids")).isEmpty)
  }

  @Test func childrenStartWithDefaultSignalsAndNothingBlocked() async throws {
    // blekit ignores these for itself (SignalForwarding, StandardOutput); a child must not.
    let previous = [SIGHUP, SIGPIPE].map { ($0, signal($0, SIG_IGN)) }
    defer { for (number, handler) in previous { signal(number, handler) } }
    let value = try await ServeCommandRunner().run(
      "grep -E '^(SigBlk|SigIgn)' /proc/self/status", limit: 512)
    let lines = String(decoding: value, as: UTF8.self).split(separator: "\n")
    #expect(lines.count == 2)
    for line in lines {
      #expect(line.hasSuffix("0000000000000000"), "\(line)")
    }
  }

  @Test func theChildIsInAProcessGroupOfItsOwnAndHoldsNoOtherDescriptor() async throws {
    let value = try await ServeCommandRunner().run(
      "echo $$ $(cut -d' ' -f5 /proc/$$/stat); ls /proc/self/fd", limit: 512)
    let lines = String(decoding: value, as: UTF8.self).split(separator: "\n")
    let ids = lines.first?.split(separator: " ").map(String.init) ?? []
    #expect(ids.count == 2 && ids[0] == ids[1], "\(ids)")
    // ls's own: 0, 1, 2 and the directory it reads.
    #expect(lines.dropFirst().count == 4, "\(lines.dropFirst())")
  }

  @Test func commandsBeyondTheCapAreRefusedAtOnce() async throws {
    let runner = ServeCommandRunner(timeout: .seconds(10), concurrency: 2)
    let slow = (0..<2).map { _ in Task { try await runner.run("sleep 2; echo done", limit: 512) } }
    try await Task.sleep(for: .milliseconds(300))
    let start = ContinuousClock.now
    await #expect(throws: ServeValueError.self) { try await runner.run("echo 1", limit: 512) }
    #expect(ContinuousClock.now - start < .seconds(1))
    for task in slow { #expect(try await task.value == Array("done".utf8)) }
    #expect(try await runner.run("echo 1", limit: 512) == Array("1".utf8))
  }

  @Test func aFIFOAsAFileValueOrProfileIsRefusedWithoutWaiting() async throws {
    let directory = try Self.temporaryDirectory()
    let fifo = "\(directory)/fifo"
    try #require(mkfifo(fifo, 0o600) == 0)
    let outcome = try await Self.within(.seconds(10)) { () async -> String in
      do {
        _ = try await ServeValueProducer(.file(fifo)).produce()
        return "returned a value"
      } catch {
        return "\(error)"
      }
    }
    #expect(outcome?.contains("is not a regular file (a FIFO)") == true, "\(outcome ?? "")")
    let profile = try await Self.within(.seconds(10)) { () async -> String in
      do {
        _ = try ServeCommand.load(fifo)
        return "loaded"
      } catch {
        return "\(error)"
      }
    }
    #expect(profile?.contains("not a regular file") == true, "\(profile ?? "")")
    let directoryValue = try await Self.within(.seconds(10)) { () async -> String in
      (try? await ServeValueProducer(.file(directory)).produce()) == nil ? "refused" : "read"
    }
    #expect(directoryValue == "refused")
  }

  @Test func aCommandDoesNotOutliveABlekitKilledOutright() async throws {
    // SIGKILL runs no code of blekit's: the kernel closes its descriptors, among them the
    // guardian's pipe. Closing that pipe here is what the guardian sees then.
    let directory = try Self.temporaryDirectory()
    let runner = ServeCommandRunner(timeout: .seconds(30))
    let running = Task { () async -> String in
      do {
        _ = try await runner.run(
          "sleep 60 & echo $$ $! > \(directory)/pids; wait", limit: 512)
        return "returned a value"
      } catch {
        return "\(error)"
      }
    }
    var pids: [pid_t] = []
    for _ in 0..<100 where pids.count < 2 {
      try await Task.sleep(for: .milliseconds(50))
      pids = (try? Self.pids(in: "\(directory)/pids")) ?? []
    }
    try #require(pids.count == 2)
    ChildProcessGroups.closeGuardianForTesting()
    let left = await Self.survivors(pids)
    #expect(left.isEmpty, "still running after the guardian's pipe closed: \(left)")
    #expect(await running.value.contains("was killed"))
  }

  @Test func aLongReadIsContinuedForABoundedNumberOfCentrals() {
    var reads = ReadContinuations()
    for central in 0..<100 { reads.set([UInt8(central)], for: "central \(central)") }
    #expect(reads.count == ReadContinuations.limit)
    #expect(reads.value(for: "central 99") == [99])
    #expect(reads.value(for: "central 0") == nil)
    reads.forget("central 99")
    #expect(reads.value(for: "central 99") == nil)
    #expect(reads.count == ReadContinuations.limit - 1)
  }

  /// What a central's long read would continue is dropped when serve hears it disconnect
  /// (ServeCommand.report, fed by PeripheralManager's connection events).
  @Test func aCentralsLongReadIsForgottenWhenItDisconnects() async throws {
    let profile = try ServeProfile.decode(
      Array(
        #"{"services":[{"uuid":"180d","characteristics":[{"uuid":"2a39","properties":["read"],"value":"x"}]}]}"#
          .utf8), file: "p.json")
    let output = ServeOutput(json: false, hex: false)
    let runtime = ServeRuntime(profile, output: output)
    let served = try #require(runtime.characteristics.first)
    let onRead = try #require(served.characteristic.onRead)
    let centrals = (0..<3).map { Central(identifier: "/org/bluez/hci0/dev_00_AA_01_00_00_0\($0)") }
    for central in centrals {
      let request = ATTReadRequest(
        characteristic: served.profile.uuid, central: central, offset: 0, mtu: 23)
      #expect(try await onRead(request) == Array("x".utf8))
    }
    #expect(served.continuedReads == 3)
    let (links, events) = AsyncStream.makeStream(of: CentralConnectionEvent.self)
    events.yield(.connected(centrals[0]))
    events.yield(.disconnected(centrals[0]))
    events.yield(.disconnected(centrals[2]))
    events.finish()
    await ServeCommand.report(links, output: output, runtime: runtime)
    #expect(served.continuedReads == 1)
  }
}
