// The profile `blekit serve` publishes: services, characteristics, descriptors, where values
// come from and where writes go, as read from a JSON file (schema: docs/serve.md).

import BLEKit

/// A GATT profile to serve, validated: every UUID parsed, every value in range, every
/// notifying characteristic with a notifier.
struct ServeProfile: Sendable, Equatable {
  var services: [Service]
  var advertisement: Advertisement

  /// What is advertised while serving.
  struct Advertisement: Sendable, Equatable {
    /// The local name (in the scan response), if any.
    var name: String?
    /// The service UUIDs listed in the advertisement.
    var services: [BluetoothUUID]
    /// The GAP appearance, e.g. 0x0341 for a heart rate belt.
    var appearance: UInt16?
  }

  struct Service: Sendable, Equatable {
    var uuid: BluetoothUUID
    var primary: Bool
    var characteristics: [Characteristic]
  }

  struct Characteristic: Sendable, Equatable {
    var uuid: BluetoothUUID
    var properties: CharacteristicProperties
    var permissions: AttributePermissions
    /// What a read returns; nil for a characteristic that cannot be read.
    var value: ValueSource?
    /// What pushes notifications or indications; nil when it has neither.
    var notifier: Notifier?
    /// Where accepted writes go.
    var writes: WriteOutput
    var descriptors: [Descriptor]
    /// Where it is in the file, e.g. `services[0].characteristics[1]`.
    var path: String
  }

  struct Descriptor: Sendable, Equatable {
    var uuid: BluetoothUUID
    var value: [UInt8]
    var writable: Bool
  }

  /// Where a value comes from.
  enum ValueSource: Sendable, Equatable {
    /// The same bytes every time.
    case fixed([UInt8])
    /// The file's bytes, read anew for each request.
    case file(String)
    /// The standard output of `/bin/sh -c COMMAND`, run for each request (one trailing
    /// newline dropped).
    case command(String)
    /// A number that steps at each request.
    case counter(Counter)
  }

  /// A counter's values: `prefix` then the number, little-endian in `width` bytes, from
  /// `from` by `step`, back to `from` after passing `to`.
  struct Counter: Sendable, Equatable {
    var from: Int64
    var to: Int64
    var step: Int64
    var width: Int
    var prefix: [UInt8]
  }

  /// What pushes values to subscribers.
  enum Notifier: Sendable, Equatable {
    /// One value of `value` every `interval`, while someone is subscribed.
    case periodic(interval: Duration, value: ValueSource)
    /// One value per line of standard input (its text, or hex digits).
    case standardInput(LineFormat)
  }

  enum LineFormat: String, Sendable, Equatable {
    case text
    case hex
  }

  /// Where a characteristic's accepted writes go.
  enum WriteOutput: String, Sendable, Equatable {
    /// A line each on standard output (text or hex, or a JSON line with `--json`).
    case print
    /// The written bytes as they are on standard output (a bridge, like the UART's RX).
    case stdout
    /// Nowhere (still accepted).
    case ignore
  }

  /// The largest value an attribute holds.
  static let maximumValueLength = 512
}
