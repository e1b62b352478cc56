// BluetoothAddress: a 48-bit device address ("AA:BB:CC:DD:EE:FF"), its LE address type, and
// the object path component BlueZ derives from it.

/// A 48-bit Bluetooth device address, canonically written `AA:BB:CC:DD:EE:FF` (uppercase, most
/// significant byte first), as BlueZ reports it in `org.bluez.Device1.Address`.
public struct BluetoothAddress: RawRepresentable, Hashable, Sendable, Comparable,
  CustomStringConvertible
{
  /// The 6 address bytes, most significant first (text order).
  public let bytes: [UInt8]

  /// Creates an address from 6 bytes in text order. Returns `nil` for any other count.
  public init?(bytes: [UInt8]) {
    guard bytes.count == 6 else { return nil }
    self.bytes = bytes
  }

  /// Parses `AA:BB:CC:DD:EE:FF` (hex digits in any case, exactly two per byte, colons between).
  ///
  /// - Throws: `BluetoothAddress.ParseError` naming the input.
  public init(_ text: String) throws(ParseError) {
    var text = text
    let parsed = text.withUTF8 { utf8 -> [UInt8]? in
      guard utf8.count == 17 else { return nil }
      var bytes: [UInt8] = []
      bytes.reserveCapacity(6)
      for group in 0..<6 {
        let start = group * 3
        if group > 0 {
          guard utf8[start - 1] == UInt8(ascii: ":") else { return nil }
        }
        guard let high = utf8[start].hexValue, let low = utf8[start + 1].hexValue else {
          return nil
        }
        bytes.append(high << 4 | low)
      }
      return bytes
    }
    guard let parsed else { throw ParseError(input: text) }
    self.bytes = parsed
  }

  /// Parses the text form; `nil` when it is not a valid address.
  public init?(rawValue: String) {
    guard let address = try? BluetoothAddress(rawValue) else { return nil }
    self = address
  }

  /// Parses the object path component BlueZ uses for a device, `dev_AA_BB_CC_DD_EE_FF`.
  public init?(objectPathComponent component: String) {
    guard component.hasPrefix("dev_"), !component.contains(":") else { return nil }
    let text = component.dropFirst(4).replacingUnderscores()
    guard let address = try? BluetoothAddress(text) else { return nil }
    self = address
  }

  /// The canonical uppercase text form, e.g. `00:AA:01:01:00:01`.
  public var rawValue: String {
    String(unsafeUninitializedCapacity: 17) { text in
      for (index, byte) in bytes.enumerated() {
        if index > 0 { text[index * 3 - 1] = UInt8(ascii: ":") }
        text[index * 3] = uppercaseHexDigits[Int(byte >> 4)]
        text[index * 3 + 1] = uppercaseHexDigits[Int(byte & 0xF)]
      }
      return 17
    }
  }

  /// The canonical uppercase text form (same as `rawValue`).
  public var description: String { rawValue }

  /// The last component of the device's object path under its adapter:
  /// `dev_AA_BB_CC_DD_EE_FF` (BlueZ replaces the colons with underscores).
  public var objectPathComponent: String {
    "dev_" + rawValue.split(separator: ":").joined(separator: "_")
  }

  /// The device's object path under an adapter, e.g.
  /// `/org/bluez/hci0/dev_00_AA_01_01_00_01` for `adapterPath` `/org/bluez/hci0`.
  public func devicePath(adapterPath: String) -> String {
    adapterPath + "/" + objectPathComponent
  }

  /// What kind of random address this is, read from its two most significant bits (Core
  /// Specification, Vol 6, Part B, 1.3.2). Meaningful only for an address whose
  /// `AddressType` is `.random`.
  public var randomAddressKind: RandomAddressKind {
    switch bytes[0] >> 6 {
    case 0b11: .staticAddress
    case 0b01: .resolvablePrivate
    case 0b00: .nonResolvablePrivate
    default: .reserved
    }
  }

  // Compare and hash the bytes, not the text (RawRepresentable would default to the text).
  public static func == (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool {
    lhs.bytes == rhs.bytes
  }

  public func hash(into hasher: inout Hasher) {
    hasher.combine(bytes)
  }

  public static func < (lhs: BluetoothAddress, rhs: BluetoothAddress) -> Bool {
    lhs.bytes.lexicographicallyPrecedes(rhs.bytes)
  }

  /// The error thrown when text is not an address.
  public struct ParseError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The text that was rejected.
    public let input: String

    /// Creates the error for rejected text.
    public init(input: String) { self.input = input }

    public var description: String {
      "invalid Bluetooth address \"\(input)\": expected six hex bytes separated by colons, "
        + "e.g. 00:AA:01:00:00:00"
    }
  }
}

/// The kind of an LE address, as BlueZ reports it in `org.bluez.Device1.AddressType`.
public enum AddressType: String, Hashable, Sendable, CaseIterable {
  /// A public address, assigned by the IEEE.
  case `public` = "public"
  /// A random address (static, or private resolvable or non-resolvable).
  case random = "random"
}

/// The sub-type of a random LE address.
public enum RandomAddressKind: Hashable, Sendable {
  /// Top bits `11`: stays the same until the device power-cycles.
  case staticAddress
  /// Top bits `01`: changes periodically; resolvable with the peer's IRK.
  case resolvablePrivate
  /// Top bits `00`: changes periodically; not resolvable.
  case nonResolvablePrivate
  /// Top bits `10`: reserved by the specification.
  case reserved
}

extension Substring {
  fileprivate func replacingUnderscores() -> String {
    String(map { $0 == "_" ? ":" : $0 })
  }
}
