// DynamicReadService: a peripheral's one read-only characteristic whose value is
// produced when a read request arrives, honouring the request's offset.

import Bluetooth
import Synchronization

/// A service with one readable characteristic whose value is made per read (the current time,
/// a counter, ...), to publish with ``PeripheralManager/add(_:)``.
///
/// A read at offset 0 produces a new value. A long value is read in pieces (ATT Read Blob,
/// with growing offsets); those continue the value the same central got at offset 0, so the
/// pieces belong together even when the producer's output changes between reads. The
/// PeripheralManager applies the offset and answers `InvalidOffset` past the end.
public final class DynamicReadService: Sendable {
  /// The service (`BlekitUUID.readService` unless given).
  public let service: MutableService
  /// The characteristic (`BlekitUUID.readCharacteristic` unless given).
  public let characteristic: MutableCharacteristic

  /// How many centrals' values are kept for blob reads (the oldest goes first).
  static let remembered = 16

  /// Creates the service; `produce` runs once per read at offset 0 (and for a blob read from a
  /// central whose first read is unknown). With `requireEncryption` the characteristic is
  /// `encrypt-read`: bluetoothd refuses a read on an unencrypted (unpaired) link.
  public init(
    service serviceUUID: BluetoothUUID = BlekitUUID.readService,
    characteristic characteristicUUID: BluetoothUUID = BlekitUUID.readCharacteristic,
    requireEncryption: Bool = false,
    produce: @escaping @Sendable () -> [UInt8]
  ) {
    let cache = Mutex<[(central: String, value: [UInt8])]>([])
    characteristic = MutableCharacteristic(
      type: characteristicUUID, properties: [.read],
      permissions: requireEncryption ? [.readable, .readEncryptionRequired] : [.readable],
      onRead: { request throws(BluetoothError) in
        let central = request.central?.identifier ?? ""
        if request.offset > 0,
          let kept = cache.withLock({ $0.last(where: { $0.central == central })?.value })
        {
          return kept
        }
        let value = produce()
        cache.withLock { cache in
          cache.removeAll { $0.central == central }
          cache.append((central, value))
          if cache.count > Self.remembered { cache.removeFirst() }
        }
        return value
      })
    service = MutableService(type: serviceUUID, characteristics: [characteristic])
  }
}
