// TransferOrder: whether the plain protocol's chunks (no sequence numbers) arrive in the order
// they were sent, decided from facts about both ends' ATT bearers.

/// Whether a received message's bytes are known to be in the order they were sent.
///
/// The sequenced framing numbers its frames, so their order is restored whatever the link
/// does. The sample's plain chunks carry no numbers: they are in order only when every
/// notification travels on one ATT bearer. With EATT (Enhanced ATT, BlueZ's
/// `[GATT] Channels` above 1, 5.66's default) a connection has several bearers, and
/// notifications sent on different bearers can be delivered out of order.
///
/// ```swift
/// let order = TransferOrder.plain(localChannels: 1, localSource: "Channels = 1 in main.conf",
///                                 peer: .supported)
/// // .guaranteed("bluetoothd uses one ATT bearer (Channels = 1 in main.conf)")
/// ```
public enum TransferOrder: Sendable, Hashable, CustomStringConvertible {
  /// The sequenced framing carried the message: frames were put back in order and the CRC-32
  /// checked.
  case sequenced
  /// Plain chunks whose order is guaranteed; the text says why.
  case guaranteed(String)
  /// Plain chunks whose order is not guaranteed; the text says why.
  case notGuaranteed(String)

  /// Whether the peer's GATT server offers EATT, from its Server Supported Features
  /// characteristic (0x2B3A, in the Generic Attribute service 0x1801; bit 0 is "EATT
  /// supported").
  public enum PeerEATT: Sendable, Hashable {
    /// Bit 0 of Server Supported Features is set.
    case supported
    /// The characteristic is absent, or its bit 0 is clear.
    case notSupported
    /// The characteristic could not be read; the text says why.
    case unknown(String)

    /// Decides from the characteristic's value (`nil` when the peer has no such
    /// characteristic).
    public init(serverSupportedFeatures value: [UInt8]?) {
      guard let value else {
        self = .notSupported
        return
      }
      guard let first = value.first else {
        self = .unknown("its Server Supported Features value is empty")
        return
      }
      self = first & 0x01 != 0 ? .supported : .notSupported
    }
  }

  /// Decides the order of plain chunks.
  ///
  /// - Parameters:
  ///   - localChannels: the local bluetoothd's `[GATT] Channels`, or `nil` when it could not
  ///     be read.
  ///   - localSource: where that number comes from, for the explanation.
  ///   - peer: whether the peer's server offers EATT.
  ///
  /// The order is guaranteed when the local bluetoothd runs one bearer (it then neither opens
  /// EATT bearers nor accepts them), or when the peer's server does not offer EATT (BlueZ then
  /// opens no EATT bearer to it; a peer that offers no EATT server is taken not to open EATT
  /// bearers as a client either). Otherwise it is not.
  public static func plain(localChannels: Int?, localSource: String, peer: PeerEATT)
    -> TransferOrder
  {
    if localChannels == 1 {
      return .guaranteed("bluetoothd uses one ATT bearer (\(localSource))")
    }
    let local =
      localChannels.map { "bluetoothd allows \($0) ATT bearers (\(localSource))" }
      ?? "bluetoothd's [GATT] Channels could not be read (\(localSource))"
    switch peer {
    case .notSupported:
      return .guaranteed(
        "the peer's GATT server does not offer EATT, so the link has one ATT bearer")
    case .supported:
      return .notGuaranteed("\(local) and the peer offers EATT")
    case .unknown(let why):
      return .notGuaranteed("\(local) and whether the peer offers EATT is unknown: \(why)")
    }
  }

  /// Whether the bytes are known to be in order.
  public var isGuaranteed: Bool {
    switch self {
    case .sequenced, .guaranteed: true
    case .notGuaranteed: false
    }
  }

  /// A short name for JSON: `sequenced`, `guaranteed` or `not-guaranteed`.
  public var name: String {
    switch self {
    case .sequenced: "sequenced"
    case .guaranteed: "guaranteed"
    case .notGuaranteed: "not-guaranteed"
    }
  }

  /// Why, in words.
  public var reason: String {
    switch self {
    case .sequenced: "the sequenced framing numbers every frame and checks the CRC-32"
    case .guaranteed(let why), .notGuaranteed(let why): why
    }
  }

  public var description: String { "\(name): \(reason)" }
}
