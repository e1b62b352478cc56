// `blekit notify`: subscribe to one characteristic and print each value as it comes.

import ArgumentParsing
import BLEKit
import Synchronization

/// Subscribes to a characteristic's notifications (or indications) and prints every value.
struct NotifyCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    name: "notify",
    abstract: "Subscribe to a characteristic and print each value as it arrives.",
    discussion: """
      Finds and connects as `blekit read` does, subscribes to CHAR-UUID (StartNotify, which \
      also delivers a value the device sends before it has confirmed the subscription), and \
      prints each value on its own line as it arrives: hex by default, UTF-8 text with \
      --text, the bytes exactly with --raw. An empty value is an empty line (nothing with \
      --raw). Stops after --count values (exit 0), after --duration (exit 0; exit 6 when \
      --count values did not all arrive), when the device disconnects (exit 7), or on Ctrl-C \
      (exit 0 without --count). Unsubscribes and disconnects before exiting. A \
      characteristic that neither notifies nor indicates exits 11. When standard output is \
      read so slowly that \(NotificationStream.bufferLimit) values wait unprinted, later \
      values are dropped until there is room; the command then ends with a line saying how \
      many, and exit 13.
      """
  )

  struct Arguments: ArgumentList {
    let device: Argument<String> = .peripheral
    let characteristic = Argument<String>("CHAR-UUID", help: "The characteristic.")
    let count = Option<Int>("--count", short: "n", value: "N", help: "Stop after N values.")
    let duration = Option<Duration>(
      "--duration", short: "d", value: "SECONDS", help: "Stop after listening this long.")
    let text = Flag("--text", help: "Print each value as UTF-8 text.")
    let raw = Flag("--raw", help: "Write each value's bytes exactly, nothing between them.")
    let service: Option<String> = .characteristicService
    let adapter: Option<String> = .adapter()
    let timeout: DefaultedOption<Duration> = .connectTimeout
  }

  let target: PeripheralTarget
  let characteristic: BluetoothUUID
  let service: BluetoothUUID?
  let count: Int?
  let duration: Duration?
  let format: ValueFormat
  let adapter: String?
  let timeout: Duration

  init(parsing arguments: ParsedArguments<Arguments>) throws(UsageError) {
    target = try parsePeripheralTarget(arguments.device)
    characteristic = try parseAttributeUUID(arguments.characteristic, label: "CHAR-UUID")
    service = try parseCharacteristicService(arguments.service)
    if let count = arguments.count, count < 1 { throw .invalid("--count must be 1 or more") }
    count = arguments.count
    if let duration = arguments.duration, duration <= .zero {
      throw .invalid("--duration must be more than 0 seconds")
    }
    duration = arguments.duration
    format = try ValueFormat.from(text: arguments.text, raw: arguments.raw)
    adapter = arguments.adapter
    timeout = arguments.timeout
    try checkTimeout(timeout)
  }

  /// How the listening ended.
  enum End: Sendable, Equatable {
    case counted
    case duration
    case cancelled
  }

  func run() async throws {
    let report = ProgressReport()
    let session = try await GattSession.open(
      target, adapter: adapter, timeout: timeout, progress: report.callAsFunction)
    var subscription: NotificationStream?
    do {
      let found = try await session.characteristic(characteristic, service: service)
      guard !found.properties.isDisjoint(with: [.notify, .indicate]) else {
        throw CLIError(
          .notSupported,
          "characteristic \(uuidLabel(characteristic)) neither notifies nor indicates "
            + "(flags: \(flagList(found)))")
      }
      let stream: NotificationStream
      do {
        stream = try await session.peripheral.notifications(for: found)
      } catch {
        throw exitError(error)
      }
      subscription = stream
      report("subscribed to \(uuidLabel(characteristic)) on \(session.peripheral.identifier)")
      let received = ValueCounter()
      let end = try await listen(stream, received: received)
      let total = received.count
      await shielded { await stream.stop() }
      await session.close()
      if let dropped = Self.droppedLine(stream) { throw droppedValuesError(dropped) }
      switch end {
      case .counted:
        return
      case .duration:
        if let count, total < count {
          throw CLIError(
            .timedOut, "only \(total) of \(count) values arrived within \(duration!)")
        }
      case .cancelled:
        if count != nil { throw CancellationError() }
      }
    } catch {
      if let subscription { await shielded { await subscription.stop() } }
      await session.close()
      // The error's own line and status stay; the drop gets a line of its own.
      if let subscription, let dropped = Self.droppedLine(subscription) {
        writeStandardError("blekit: \(dropped)\n")
      }
      throw error
    }
  }

  /// The line for values the stream dropped because they were not printed fast enough, if it
  /// dropped any.
  static func droppedLine(_ stream: NotificationStream) -> String? {
    let dropped = stream.droppedValues
    guard dropped > 0 else { return nil }
    return "\(dropped) values were dropped: standard output was not read fast enough "
      + "(\(NotificationStream.bufferLimit) values waited unprinted)"
  }

  /// Prints values until the count, the duration, cancellation, or the end of the stream.
  private func listen(_ stream: NotificationStream, received: ValueCounter) async throws -> End {
    let count = self.count
    let duration = self.duration
    let format = self.format
    let name = target.description
    return try await withThrowingTaskGroup(of: End.self) { group in
      group.addTask {
        do {
          for try await value in stream {
            writeStandardOutput(format.render(value))
            let seen = received.increment()
            if let count, seen >= count { return .counted }
          }
        } catch let error as BluetoothError where error.code == .disconnected {
          let seen = received.count
          throw CLIError(.disconnected, "\(name) disconnected after \(seen) values: \(error)")
        } catch is CancellationError {
          return .cancelled
        } catch {
          throw exitError(error)
        }
        // The stream ends without an error only when the listening task is cancelled.
        return .cancelled
      }
      if let duration {
        group.addTask {
          do {
            try await Task.sleep(for: duration)
            return .duration
          } catch {
            return .cancelled
          }
        }
      }
      defer { group.cancelAll() }
      return try await group.next() ?? .cancelled
    }
  }
}

/// How many values arrived, shared by the listening task and the command.
final class ValueCounter: Sendable {
  private let value = Mutex(0)

  /// The count so far.
  var count: Int { value.withLock { $0 } }

  /// Adds one and returns the new count.
  func increment() -> Int {
    value.withLock { count in
      count += 1
      return count
    }
  }
}
