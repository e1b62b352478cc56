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
    /// Manufacturer data by company identifier.
    var manufacturerData: [UInt16: [UInt8]] = [:]
    /// Service data by service UUID.
    var serviceData: [BluetoothUUID: [UInt8]] = [:]
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
    /// What a read returns; nil for a characteristic that cannot be read, or whose reads are
    /// refused with `readError`.
    var value: ValueSource?
    /// The ATT error every read is answered with (a cloned device refused the read).
    var readError: ReadError?
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

  /// The ATT error a read is refused with: what a cloned device answered (`blekit clone`).
  enum ReadError: Sendable, Equatable {
    /// 0x02: bluetoothd answers it for `NotPermitted`.
    case readNotPermitted
    /// 0x05: bluetoothd answers it itself on a link without an authenticated key (the
    /// characteristic gets `encrypt-authenticated-read`).
    case insufficientAuthentication
    /// 0x06: bluetoothd answers it for `NotSupported`.
    case requestNotSupported
    /// 0x08: bluetoothd answers it for `NotAuthorized`.
    case insufficientAuthorization
    /// 0x0F: bluetoothd answers it itself on an unencrypted link (the characteristic gets
    /// `encrypt-read`).
    case insufficientEncryption
    /// Any other ATT code: answered as a failed read (bluetoothd chooses the code it sends).
    case other(UInt8)

    /// The profile's spelling, in the ATT specification's words.
    static let names: [(String, ReadError)] = [
      ("read-not-permitted", .readNotPermitted),
      ("insufficient-authentication", .insufficientAuthentication),
      ("request-not-supported", .requestNotSupported),
      ("insufficient-authorization", .insufficientAuthorization),
      ("insufficient-encryption", .insufficientEncryption),
    ]

    /// `insufficient-encryption`, or `0x80` for another code.
    var name: String {
      if let (name, _) = Self.names.first(where: { $0.1 == self }) { return name }
      if case .other(let code) = self { return "0x" + HexBytes.format([code]) }
      return ""
    }

    /// The ATT error code.
    var code: UInt8 {
      switch self {
      case .readNotPermitted: 0x02
      case .insufficientAuthentication: 0x05
      case .requestNotSupported: 0x06
      case .insufficientAuthorization: 0x08
      case .insufficientEncryption: 0x0F
      case .other(let code): code
      }
    }

    /// The named error for `code` when it has one.
    init(code: UInt8) {
      switch code {
      case 0x02: self = .readNotPermitted
      case 0x05: self = .insufficientAuthentication
      case 0x06: self = .requestNotSupported
      case 0x08: self = .insufficientAuthorization
      case 0x0F: self = .insufficientEncryption
      default: self = .other(code)
      }
    }

    /// The permission that makes bluetoothd itself refuse the read on an insecure link.
    var permission: AttributePermissions {
      switch self {
      case .insufficientEncryption: .readEncryptionRequired
      case .insufficientAuthentication: .readAuthenticationRequired
      default: []
      }
    }

    /// What the read handler answers (for the two security errors: once the link is secure
    /// enough, since the clone never saw the value).
    var attError: BluetoothError {
      switch self {
      case .readNotPermitted: .att(.readNotPermitted)
      case .requestNotSupported: .att(.requestNotSupported)
      case .insufficientAuthorization: .att(.insufficientAuthorization)
      case .insufficientAuthentication, .insufficientEncryption:
        .att(.unlikelyError, "the cloned device's value was never read")
      case .other(let code): .att(.unlikelyError, "ATT error 0x" + HexBytes.format([code]))
      }
    }
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
    /// These values in turn, one per request, back to the first after the last (`clone
    /// --listen` replays the notifications it heard this way).
    case cycle([[UInt8]])
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
