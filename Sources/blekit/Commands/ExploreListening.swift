// `blekit explore --listen` and `blekit clone --listen`: subscribe to every notifying
// characteristic and print (explore) or record (clone) values as they come, until the time is
// up, Ctrl-C, or the device leaves.

import ArgumentParsing
import BLEKit
import JSON

extension ExploreCommand {
  /// One value heard while listening.
  typealias Heard = GattWalk.Heard

  /// Subscribes to every characteristic of `tree` that notifies or indicates and prints what
  /// arrives for `duration`. Ctrl-C ends the listening normally; a disconnection is an error
  /// (exit 7).
  static func listen(
    to tree: [ExploredService], on peripheral: Peripheral, for duration: Duration, json: Bool,
    report: ProgressReport
  ) async throws {
    try await GattWalk.listen(
      to: tree, on: peripheral, for: duration, report: report,
      subscribeFailed: { characteristic, error in
        printLine(
          json
            ? subscribeErrorJSON(characteristic, error).text
            : "notify  \(uuidLabel(characteristic.uuid))  error  \(error.message)")
      },
      heard: { heard in
        printLine(json ? notificationJSON(heard).text : notificationText(heard))
      })
  }

  /// `notify  +1.234s  08590f7e-…  68 65 6c 6c 6f  "hello"`: one line per value.
  static func notificationText(_ heard: Heard) -> String {
    var line = "notify  +\(threeDecimals(heard.seconds))s  \(uuidLabel(heard.characteristic))"
    if let name = AssignedNumbers.characteristicName(heard.characteristic) {
      line += "  \(name)"
    }
    line += heard.value.isEmpty ? "  (empty)" : "  \(spacedHex(heard.value))"
    if let text = printableText(heard.value) { line += "  " + JSONValue.quoted(text) }
    return line
  }

  static func notificationJSON(_ heard: Heard) -> JSONValue {
    .object([
      .init("type", .string("notification")),
      .init("seconds", .number(heard.seconds)),
      .init("service", .string(heard.service.uuidString)),
      .init("characteristic", .string(heard.characteristic.uuidString)),
      .init(
        "name",
        AssignedNumbers.characteristicName(heard.characteristic).map { .string($0) } ?? .null
      ),
      .init("value", .string(HexBytes.format(heard.value))),
      .init("text", printableText(heard.value).map { .string($0) } ?? .null),
    ])
  }

  static func subscribeErrorJSON(_ characteristic: RemoteCharacteristic, _ error: BluetoothError)
    -> JSONValue
  {
    .object([
      .init("type", .string("subscribeError")),
      .init("characteristic", .string(characteristic.uuid.uuidString)),
      .init("error", .string(error.message)),
    ])
  }
}

/// `1.234`.
func threeDecimals(_ value: Double) -> String {
  let thousandths = Int((value * 1000).rounded())
  let fraction = String(thousandths % 1000)
  return "\(thousandths / 1000)." + String(repeating: "0", count: 3 - fraction.count) + fraction
}

extension GattWalk {
  /// One value heard while listening.
  struct Heard: Sendable {
    var seconds: Double
    var service: BluetoothUUID
    var characteristic: BluetoothUUID
    var value: [UInt8]
  }

  /// Subscribes to every characteristic of `tree` that notifies or indicates and hands each
  /// value to `heard` for `duration` (a subscription that fails goes to `subscribeFailed`).
  /// Ctrl-C ends the listening normally; a disconnection is an error (exit 7).
  static func listen(
    to tree: [ExploredService], on peripheral: Peripheral, for duration: Duration,
    report: ProgressReport,
    subscribeFailed: (RemoteCharacteristic, BluetoothError) -> Void,
    heard: @escaping @Sendable (Heard) -> Void
  ) async throws {
    let start = ContinuousClock.now
    var streams: [(RemoteService, RemoteCharacteristic, NotificationStream)] = []
    for explored in tree {
      for item in explored.characteristics
      where !item.characteristic.properties.isDisjoint(with: [.notify, .indicate]) {
        do {
          let stream = try await peripheral.notifications(for: item.characteristic)
          streams.append((explored.service, item.characteristic, stream))
        } catch {
          if error.code == .cancelled || Task.isCancelled { break }
          if error.code == .disconnected { throw exitError(error) }
          subscribeFailed(item.characteristic, error)
        }
      }
    }
    report("listening to \(streams.count) characteristic(s) for \(duration)")
    do {
      try await withThrowingTaskGroup(of: Void.self) { group in
        for (service, characteristic, stream) in streams {
          group.addTask {
            do {
              for try await value in stream {
                heard(
                  Heard(
                    seconds: seconds(ContinuousClock.now - start), service: service.uuid,
                    characteristic: characteristic.uuid, value: value))
              }
            } catch let error as BluetoothError where error.code == .disconnected {
              throw CLIError(.disconnected, "\(peripheral.identifier) disconnected: \(error)")
            } catch is CancellationError {
              return
            }
          }
        }
        group.addTask {
          try? await Task.sleep(for: duration)
          throw ListenEnded()
        }
        defer { group.cancelAll() }
        // Streams never end by themselves while subscribed; the timer ends the group.
        while try await group.next() != nil {}
      }
    } catch is ListenEnded {
      // Time is up, or Ctrl-C cancelled the sleep: a normal end.
    } catch {
      await stopAll(streams.map(\.2))
      if let dropped = droppedLine(streams.map(\.2)) { writeStandardError("blekit: \(dropped)\n") }
      throw error
    }
    await stopAll(streams.map(\.2))
    if let dropped = droppedLine(streams.map(\.2)) { throw droppedValuesError(dropped) }
  }

  /// The line for values the streams dropped because they were not printed fast enough, if
  /// they dropped any.
  private static func droppedLine(_ streams: [NotificationStream]) -> String? {
    let dropped = streams.reduce(0) { $0 + $1.droppedValues }
    guard dropped > 0 else { return nil }
    return "\(dropped) notifications were dropped: standard output was not read fast enough "
      + "(a characteristic's \(NotificationStream.bufferLimit) values waited unprinted)"
  }

  /// Thrown by the timer to end the listening group.
  private struct ListenEnded: Error {}

  private static func stopAll(_ streams: [NotificationStream]) async {
    await shielded {
      for stream in streams { await stream.stop() }
    }
  }
}
