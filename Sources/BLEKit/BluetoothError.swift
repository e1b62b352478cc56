// BluetoothError: BLEKit's one error type, with bluetoothd's own error kept underneath.
import BlueZ

/// BLEKit's one error type (CoreBluetooth's `CBError` and `CBATTError` in one): what
/// ``CentralManager``, ``Peripheral``, ``PeripheralManager``, ``PairingAgent``, L2CAP channels,
/// the transfer protocols and the advertising codecs throw.
///
/// The ``code`` says what went wrong in BLEKit's terms; it is open (new codes can be added
/// without breaking a `switch`, which needs a `default`). ``underlyingName`` and
/// ``underlyingMessage`` keep bluetoothd's own error (e.g. `org.bluez.Error.InProgress`) or the
/// bus's when there was one, for diagnosis. Match a code with
/// `catch let error as BluetoothError where error.code == .timeout`, or with
/// `catch BluetoothError.Code.timeout`. Codes of one area are declared beside it (L2CAP's in
/// L2CAPErrors.swift, the transfer protocols' in TransferErrors.swift, ...); the typed detail
/// a code carries (an errno, the sizes of a size check, an offset) is in the properties below,
/// `nil` where it does not apply, so nothing needs the message's text.
public struct BluetoothError: Error, Hashable, Sendable, CustomStringConvertible {
  /// What went wrong, as a stable code.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// bluetoothd is not on the bus.
    public static let serviceUnavailable = Code(rawValue: "serviceUnavailable")
    /// The connection to the system bus was lost (the bus daemon stopped or restarted): the
    /// central can do nothing more; open a new one.
    public static let busLost = Code(rawValue: "busLost")
    /// The bus refused us.
    public static let unauthorized = Code(rawValue: "unauthorized")
    /// The requested adapter does not exist (or there is none).
    public static let adapterNotFound = Code(rawValue: "adapterNotFound")
    /// The adapter is powered off.
    public static let poweredOff = Code(rawValue: "poweredOff")
    /// A scan is already running on this manager.
    public static let scanInProgress = Code(rawValue: "scanInProgress")
    /// The peripheral is unknown to bluetoothd (never discovered, or removed).
    public static let peripheralNotFound = Code(rawValue: "peripheralNotFound")
    /// Connecting failed after the allowed retries.
    public static let connectionFailed = Code(rawValue: "connectionFailed")
    /// The operation did not finish in time.
    public static let timeout = Code(rawValue: "timeout")
    /// The peripheral is not connected (or disconnected during the operation).
    public static let disconnected = Code(rawValue: "disconnected")
    /// A service, characteristic or descriptor was not found.
    public static let attributeNotFound = Code(rawValue: "attributeNotFound")
    /// The characteristic does not support the operation (e.g. no `notify` flag).
    public static let notSupported = Code(rawValue: "notSupported")
    /// bluetoothd refused: the operation is not permitted or not authorized
    /// (`org.bluez.Error.NotPermitted`, `org.bluez.Error.NotAuthorized`).
    public static let notPermitted = Code(rawValue: "notPermitted")
    /// The adapter is not ready for the operation (`org.bluez.Error.NotReady`, e.g. powered
    /// off while bluetoothd was asked).
    public static let notReady = Code(rawValue: "notReady")
    /// The bus failed the call (not an answer from bluetoothd).
    public static let bus = Code(rawValue: "bus")
    /// bluetoothd answered with another error; see ``BluetoothError/underlyingName``.
    public static let bluez = Code(rawValue: "bluez")
    /// The task was cancelled.
    public static let cancelled = Code(rawValue: "cancelled")
    /// A system call failed (e.g. reading the notification socket).
    public static let system = Code(rawValue: "system")
    /// A transfer stopped before the end of its message (the peer disconnected or
    /// unsubscribed, the link went silent, the bus went away); nothing of the message is
    /// returned. ``BluetoothError/interruptedTransfer`` says how much arrived and what cut it.
    public static let transferInterrupted = Code(rawValue: "transferInterrupted")
  }

  /// How far a transfer got before it was cut (with ``Code/transferInterrupted``).
  public struct InterruptedTransfer: Hashable, Sendable {
    /// Message bytes received before the cut.
    public var bytesReceived: Int
    /// Data chunks (frames, or an L2CAP message's SDUs) received before the cut; 0 for the
    /// sender of an L2CAP message, whose ``bytesReceived`` are the bytes the receiver confirmed.
    public var chunksReceived: Int
    /// What ended it, when known (e.g. ``Code/disconnected``, ``Code/timeout``,
    /// ``Code/busLost``); `nil` when the notifications simply stopped.
    public var cause: Code?
    /// The message's length as its sender announced it, when the protocol announces one (an
    /// L2CAP message's header); `nil` otherwise (and before the header arrived).
    public var bytesExpected: Int?
    /// The ``TransferDeadlines`` limit that ended it, when one did (``cause`` is then
    /// ``Code/timeout``).
    public var expiry: TransferDeadlines.Expiry?

    /// How far a transfer got, and what cut it.
    public init(
      bytesReceived: Int, chunksReceived: Int, cause: Code?, bytesExpected: Int? = nil,
      expiry: TransferDeadlines.Expiry? = nil
    ) {
      self.bytesReceived = bytesReceived
      self.chunksReceived = chunksReceived
      self.cause = cause
      self.bytesExpected = bytesExpected
      self.expiry = expiry
    }
  }

  /// The two CRC-32 values of a failed check (``Code/checksumMismatch``).
  public struct ChecksumMismatch: Hashable, Sendable {
    /// The sender's CRC-32, as its frame or header announced it.
    public var expected: UInt32
    /// The CRC-32 of the bytes that arrived.
    public var actual: UInt32

    /// The sender's CRC-32 and the received bytes'.
    public init(expected: UInt32, actual: UInt32) {
      self.expected = expected
      self.actual = actual
    }
  }

  /// What went wrong.
  public var code: Code
  /// One line for a person.
  public var message: String
  /// bluetoothd's error, when there was one.
  package var bluez: BlueZError?
  /// For ``Code/transferInterrupted``: the bytes and chunks received before the cut, and its
  /// cause; `nil` for every other code.
  public var interruptedTransfer: InterruptedTransfer?
  /// The kernel's errno behind a failed system call (an L2CAP socket's connect, bind, read,
  /// ...), when there was one.
  public var errno: Int32?
  /// For a size check, the size found: the length of a message, an SDU or an advertisement,
  /// an ATT MTU (``Code/mtuTooSmall``), the bytes a sequenced message has
  /// (``Code/lengthMismatch``) or the bytes of undecodable text (``Code/invalidUTF8``).
  public var size: Int?
  /// For a size check, the bound it broke: the most accepted (``Code/messageTooLarge``,
  /// ``Code/sduTooLarge``, ``Code/advertisementTooLarge``, ``Code/tooManyMessagesInFlight``
  /// counts messages), the least (``Code/mtuTooSmall``), or the length announced
  /// (``Code/lengthMismatch``).
  public var limit: Int?
  /// Where in the input the problem starts: a byte offset (``Code/invalidUTF8``, an AD
  /// structure's offset), or in text's UTF-8 (``Code/invalidHexBytes``).
  public var offset: Int?
  /// For ``Code/checksumMismatch``: the sender's CRC-32 and the received bytes'.
  public var checksums: ChecksumMismatch?
  /// The sequenced transfer's message number the error is about
  /// (``Code/lengthMismatch``, ``Code/checksumMismatch``), when it is one.
  public var messageNumber: UInt8?
  /// For ``Code/advertisementTooLarge``: the advertisement's sizes, field by field.
  public var advertisingPayloadSize: AdvertisingPayloadSize?
  /// What was being parsed when the error is about text (``Code/invalidHexBytes``).
  public var input: String?
  /// The field of advertising data the error is about (``Code/advertisingFieldTooShort``),
  /// e.g. `manufacturer data`.
  public var field: String?
  /// The AD type that did not carry what was asked for (``Code/unexpectedADType``).
  public var adType: UInt8?
  /// Whether an exploration already reported this as its link's loss (it is not wrapped again).
  package var lostDuringExploration = false
  /// The framing version a peer used that this side does not know
  /// (``Code/unsupportedVersion``).
  public var framingVersion: UInt8?

  /// The D-Bus error name bluetoothd or the bus answered with, e.g.
  /// `org.bluez.Error.NotPermitted`, when there was one.
  public var underlyingName: String? { bluez?.name }
  /// bluetoothd's or the bus's own text for the error, when there was one.
  public var underlyingMessage: String? { bluez?.message }
  /// The ATT error code: the one a handler answers with (``Code/attError``), or the one the
  /// peripheral answered a read or write with, when bluetoothd passed one on (e.g. `0x0b`,
  /// Attribute Not Long); `nil` otherwise. bluetoothd turns some ATT
  /// errors into codes of its own instead (Read Not Permitted is ``Code/notPermitted``,
  /// Request Not Supported ``Code/notSupported``); the others keep their ATT code here, with
  /// ``Code/bluez``.
  public var attErrorCode: UInt8? { att?.rawValue ?? bluez?.attErrorCode }
  /// For ``Code/attError``: the ATT code a handler answers with (``att(_:_:)``).
  public var att: ATTCode?

  /// An error with a code and a one-line message.
  public init(_ code: Code, _ message: String) {
    self.init(code, message, bluez: nil)
  }

  package init(_ code: Code, _ message: String, bluez: BlueZError?) {
    self.code = code
    self.message = message
    self.bluez = bluez
  }

  /// An error with the errno behind it (a system call's failure).
  package init(_ code: Code, _ message: String, errno: Int32?) {
    self.init(code, message, bluez: nil)
    self.errno = errno
  }

  /// A transfer cut after `bytesReceived` bytes in `chunksReceived` chunks, by `cause` when it
  /// is known (whose message ends the line, and whose bluetoothd error is kept).
  package static func transferInterrupted(
    bytesReceived: Int, chunksReceived: Int, cause: BluetoothError?
  ) -> BluetoothError {
    var error = BluetoothError(
      .transferInterrupted,
      "transfer cut before the end of the message after \(bytesReceived) bytes in "
        + "\(chunksReceived) chunks" + (cause.map { " (\($0.message))" } ?? ""),
      bluez: cause?.bluez)
    error.interruptedTransfer = InterruptedTransfer(
      bytesReceived: bytesReceived, chunksReceived: chunksReceived, cause: cause?.code)
    return error
  }

  /// Wraps a BlueZ-layer error, keeping its meaning where blekit has a code for it; the
  /// message says what was being done.
  package init(_ error: BlueZError, while doing: String) {
    self.init(Self.code(for: error), "\(doing): \(error.description)", bluez: error)
  }

  /// Wraps a BlueZ-layer error as it is: bluetoothd's text with its error name, or the bare
  /// message of an error blekit itself raised.
  package init(_ error: BlueZError) {
    let text = error.code.rawValue.hasPrefix("blekit.") ? error.message : error.description
    self.init(Self.code(for: error), text, bluez: error)
  }

  /// blekit's code for a BlueZ-layer error.
  private static func code(for error: BlueZError) -> Code {
    switch error.code {
    case .serviceUnavailable: .serviceUnavailable
    case .busLost: .busLost
    case .accessDenied: .unauthorized
    case .adapterNotFound: .adapterNotFound
    case .timeout: .timeout
    case .notConnected: .disconnected
    case .objectNotFound, .doesNotExist: .attributeNotFound
    case .notSupported: .notSupported
    case .notPermitted, .notAuthorized: .notPermitted
    case .notReady: .notReady
    case .bus: .bus
    default: .bluez
    }
  }

  /// One line.
  public var description: String { message }
}

extension BluetoothError.Code {
  /// Lets `catch BluetoothError.Code.timeout` (or a `case` of a `switch` over an error) match a
  /// ``BluetoothError`` with this code.
  public static func ~= (code: Self, error: any Error) -> Bool {
    (error as? BluetoothError)?.code == code
  }
}
