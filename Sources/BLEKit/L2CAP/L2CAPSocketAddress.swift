// L2CAPSocketAddress: the kernel's `struct sockaddr_l2` for LE channels, encoded and decoded
// as bytes (no C header: the layout is written out here from <bluetooth/l2cap.h>).
import Bluetooth

/// An LE Protocol/Service Multiplexer: the "port" of an L2CAP LE credit-based channel.
///
/// LE PSMs run from 0x0001 to 0x00FF: 0x0001-0x007F are assigned by the Bluetooth SIG (Linux
/// lets only a process with `CAP_NET_BIND_SERVICE` listen on them), 0x0080-0x00FF are dynamic,
/// the range the kernel picks from when a channel is published without a PSM.
public struct L2CAPPSM: RawRepresentable, Hashable, Sendable, Comparable, CustomStringConvertible {
  public let rawValue: UInt16

  /// Returns `nil` outside 0x0001...0x00FF (the LE range).
  public init?(rawValue: UInt16) {
    guard Self.validRange.contains(rawValue) else { return nil }
    self.rawValue = rawValue
  }

  /// Every LE PSM.
  public static let validRange: ClosedRange<UInt16> = 0x0001...0x00FF
  /// The dynamic LE PSMs, free for applications.
  public static let dynamicRange: ClosedRange<UInt16> = 0x0080...0x00FF

  /// The value of Apple's L2CAP PSM characteristic: the PSM as a little-endian UInt16.
  public var characteristicValue: [UInt8] { [UInt8(rawValue & 0xFF), UInt8(rawValue >> 8)] }

  /// Reads the PSM characteristic's value: exactly 2 bytes, little-endian, in the LE range.
  public init?(characteristicValue bytes: [UInt8]) {
    guard bytes.count == 2 else { return nil }
    self.init(rawValue: UInt16(bytes[0]) | UInt16(bytes[1]) << 8)
  }

  public static func < (lhs: L2CAPPSM, rhs: L2CAPPSM) -> Bool { lhs.rawValue < rhs.rawValue }

  public var description: String { String(rawValue) }
}

/// The kernel's LE L2CAP socket address (`struct sockaddr_l2`): family, PSM, address, CID and
/// address type, 14 bytes with its padding.
struct L2CAPSocketAddress: Hashable, Sendable {
  /// `l2_bdaddr_type`: `BDADDR_BREDR` (0), `BDADDR_LE_PUBLIC` (1), `BDADDR_LE_RANDOM` (2).
  enum Kind: UInt8, Sendable {
    case bredr = 0
    case lePublic = 1
    case leRandom = 2

    init(_ type: AddressType) { self = type == .random ? .leRandom : .lePublic }

    var addressType: AddressType? {
      switch self {
      case .lePublic: .public
      case .leRandom: .random
      case .bredr: nil
      }
    }
  }

  /// `AF_BLUETOOTH`.
  static let family: UInt16 = 31
  /// `sizeof(struct sockaddr_l2)`: 2 + 2 + 6 + 2 + 1, padded to 2-byte alignment.
  static let size = 14
  /// `BDADDR_ANY`.
  static let anyAddress = BluetoothAddress(bytes: [0, 0, 0, 0, 0, 0])!

  var address: BluetoothAddress
  var kind: Kind
  /// 0 asks the kernel for a dynamic PSM (bind) or is "none" (a connected socket's own end).
  var psm: UInt16

  /// The bytes the kernel reads: little-endian numbers, the address least significant byte
  /// first (`bdaddr_t`), CID 0.
  var bytes: [UInt8] {
    var out = [UInt8](repeating: 0, count: Self.size)
    out[0] = UInt8(Self.family & 0xFF)
    out[1] = UInt8(Self.family >> 8)
    out[2] = UInt8(psm & 0xFF)
    out[3] = UInt8(psm >> 8)
    for (index, byte) in address.bytes.reversed().enumerated() { out[4 + index] = byte }
    out[12] = kind.rawValue
    return out
  }

  /// Decodes what `accept`, `getsockname` or `getpeername` wrote; nil for another family or
  /// a short buffer.
  init?(bytes: [UInt8]) {
    guard bytes.count >= 13,
      UInt16(bytes[0]) | UInt16(bytes[1]) << 8 == Self.family,
      let kind = Kind(rawValue: bytes[12]),
      let address = BluetoothAddress(bytes: Array(bytes[4..<10].reversed()))
    else { return nil }
    self.init(address: address, kind: kind, psm: UInt16(bytes[2]) | UInt16(bytes[3]) << 8)
  }

  init(address: BluetoothAddress, kind: Kind, psm: UInt16) {
    self.address = address
    self.kind = kind
    self.psm = psm
  }
}
