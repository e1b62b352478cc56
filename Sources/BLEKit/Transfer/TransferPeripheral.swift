// TransferPeripheral: the sender side of the transfer service on a PeripheralManager: serves
// Apple's sample characteristic (plain chunks, then EOM) and blekit's sequenced one.
import Bluetooth
import Synchronization

/// Serves the transfer service (Apple's "Transferring Data Between Bluetooth Low Energy
/// Devices" protocol: chunks, then `EOM`): a message sent to every central that subscribes,
/// and replies written back.
///
/// The service (`BlekitUUID.transferService`) holds two characteristics:
/// - Apple's sample characteristic (notify + write without response): the message in chunks of
///   min(MTU - 3, 512) bytes, then `EOM`, as the sample's central expects. Its order is only
///   as good as the link's (see `TransferChunker`).
/// - blekit's sequenced characteristic (notify): the same message in sequenced, CRC-checked
///   frames (`SequencedTransferEncoder`), which a blekit central prefers.
///
/// A write to the sample characteristic is a reply; as in the sample it replaces the message
/// sent to the next subscriber.
public final class TransferPeripheral: Sendable {
  /// Which characteristic a transfer went through.
  public enum Framing: String, Sendable, Hashable {
    /// Apple's sample protocol: chunks, then `EOM`.
    case plain
    /// blekit's sequenced frames.
    case sequenced
  }

  /// What happens while serving.
  public enum Event: Sendable {
    /// A central subscribed; the message starts going out.
    case subscribed(Framing, Central?, messageLength: Int)
    /// Message bytes handed to bluetoothd so far on this subscription.
    case progress(Framing, sent: Int, total: Int)
    /// The whole message and its end marker were handed to bluetoothd.
    case sent(Framing, bytes: Int, duration: Duration)
    /// The central left before the end (unsubscribed or disconnected).
    case cut(Framing, sent: Int, total: Int)
    /// The send was given up: a limit of ``TransferPeripheral/deadlines`` passed (no value
    /// went out for the idle timeout, or the deadline passed). The central stays connected.
    case timedOut(Framing, sent: Int, total: Int, TransferDeadlines.Expiry)
    /// The central unsubscribed (after a complete send, or not).
    case unsubscribed(Framing, Central?)
    /// A central wrote a reply.
    case reply([UInt8], Central?)
    /// bluetoothd stopped the advertisement by itself.
    case advertisingStopped
  }

  public let manager: PeripheralManager
  /// Apple's sample characteristic.
  public let plainCharacteristic: MutableCharacteristic
  /// blekit's sequenced characteristic.
  public let sequencedCharacteristic: MutableCharacteristic
  public let service: MutableService

  private let message: Mutex<[UInt8]>
  /// How long one subscription's send may take, in all and without a value going out.
  public let deadlines: TransferDeadlines

  /// Creates the service for `message` (UTF-8 text or any bytes). Nothing is published yet.
  /// With `requireEncryption`, subscribing and writing need an encrypted (paired) link
  /// (`encrypt-notify`, `encrypt-write`). With `sequenced: false` the service holds only
  /// Apple's sample characteristic, exactly as the sample's peripheral serves it (to test
  /// centrals written for it); a blekit central then cannot restore a reordered message.
  public init(
    manager: PeripheralManager, message: [UInt8], requireEncryption: Bool = false,
    sequenced: Bool = true, deadlines: TransferDeadlines = TransferDeadlines()
  ) {
    self.manager = manager
    self.deadlines = deadlines
    self.message = Mutex(message)
    let secure: CharacteristicProperties = requireEncryption ? [.notifyEncryptionRequired] : []
    plainCharacteristic = MutableCharacteristic(
      type: BlekitUUID.transferCharacteristic,
      properties: CharacteristicProperties([.notify, .writeWithoutResponse]).union(secure),
      permissions: requireEncryption
        ? [.readable, .writeable, .writeEncryptionRequired] : [.readable, .writeable])
    sequencedCharacteristic = MutableCharacteristic(
      type: BlekitUUID.sequencedTransferCharacteristic,
      properties: CharacteristicProperties.notify.union(secure), permissions: [.readable])
    service = MutableService(
      type: BlekitUUID.transferService,
      characteristics: sequenced
        ? [plainCharacteristic, sequencedCharacteristic] : [plainCharacteristic])
  }

  /// The message the next subscriber gets.
  public var currentMessage: [UInt8] { message.withLock { $0 } }

  /// Publishes the service and advertises its UUID, general discoverable (and `localName`, in
  /// the scan response).
  public func publish(localName: String? = nil) async throws(BluetoothError) {
    try await manager.add(service)
    // General discoverable (Flags 0x06), as CoreBluetooth advertises: during a discovery
    // without a filter (bluetoothctl's `scan on`), bluetoothd reports nothing of an LE
    // advertiser whose Flags lack General or Limited Discoverable (src/adapter.c,
    // device_is_discoverable: 5.66 creates no device for it; 5.82 creates one for a
    // connectable advertiser, without its advertised data).
    try await manager.startAdvertising(
      AdvertisingPayload(
        discoverable: true, serviceUUIDs: [BlekitUUID.transferService], localName: localName))
  }

  /// Serves subscribers until the manager's events end (``PeripheralManager/close()``) or the
  /// consuming task is cancelled. Each subscription gets the current message.
  public func serve() -> AsyncStream<Event> {
    // Unbounded: replies and ends must not be lost; progress events come at most one per
    // value sent, and sending waits for room on the link.
    let (stream, continuation) = AsyncStream.makeStream(of: Event.self, bufferingPolicy: .unbounded)
    let task = Task { [self] in
      // One sender per framing, or per framing and central where bluetoothd reaches each
      // central through its own socket (BlueZ 5.76 and later): each central then gets the
      // whole message, and a second subscriber does not restart the first one's.
      var senders: [SenderKey: Task<Void, Never>] = [:]
      for await event in manager.events {
        switch event {
        case .subscribed(let central, let characteristic):
          guard let framing = framing(of: characteristic) else { continue }
          let individually =
            central != nil && manager.notifiesCentralsIndividually(characteristic)
          let key = SenderKey(framing: framing, central: individually ? central : nil)
          senders[key]?.cancel()
          let bytes = currentMessage
          continuation.yield(.subscribed(framing, central, messageLength: bytes.count))
          senders[key] = Task {
            await self.send(
              bytes, framing: framing, to: individually ? central : nil, events: continuation)
          }
        case .unsubscribed(let central, let characteristic):
          guard let framing = framing(of: characteristic) else { continue }
          continuation.yield(.unsubscribed(framing, central))
        case .write(let request):
          guard request.characteristic == plainCharacteristic.uuid else { continue }
          message.withLock { $0 = request.value }
          continuation.yield(.reply(request.value, request.central))
        case .readyToUpdate:
          continue
        case .advertisingPaused:
          // Only further centrals must wait for the connected one to leave; the transfer
          // to the connected one goes on.
          continue
        case .advertisingStopped:
          continuation.yield(.advertisingStopped)
        }
      }
      for sender in senders.values { sender.cancel() }
      continuation.finish()
    }
    continuation.onTermination = { _ in task.cancel() }
    return stream
  }

  private struct SenderKey: Hashable {
    let framing: Framing
    let central: Central?
  }

  private func framing(of characteristic: MutableCharacteristic) -> Framing? {
    if characteristic === plainCharacteristic { return .plain }
    if characteristic === sequencedCharacteristic { return .sequenced }
    return nil
  }

  /// Sends one message on one subscription, waiting for room between values, within
  /// ``deadlines`` (progress: a value handed to bluetoothd).
  private func send(
    _ bytes: [UInt8], framing: Framing, to central: Central?,
    events: AsyncStream<Event>.Continuation
  ) async {
    let watch = ProgressWatch(deadlines)
    let work = Task {
      await self.sendValues(bytes, framing: framing, central: central, to: events, watch: watch)
    }
    watch.start { _ in work.cancel() }
    let ending = await withTaskCancellationHandler {
      await work.value
    } onCancel: {
      work.cancel()
    }
    watch.stop()
    switch ending {
    case .sent(let duration):
      events.yield(.sent(framing, bytes: bytes.count, duration: duration))
    case .cut(let sent):
      if let expiry = watch.expired {
        events.yield(.timedOut(framing, sent: sent, total: bytes.count, expiry))
      } else {
        events.yield(.cut(framing, sent: sent, total: bytes.count))
      }
    }
  }

  private enum SendEnding: Sendable {
    case sent(Duration)
    case cut(sent: Int)
  }

  /// The values of one message, one at a time. Each value is made as it is sent (a message is
  /// never held twice, as bytes and as frames).
  private func sendValues(
    _ bytes: [UInt8], framing: Framing, central: Central?,
    to events: AsyncStream<Event>.Continuation, watch: ProgressWatch
  ) async -> SendEnding {
    let characteristic = framing == .plain ? plainCharacteristic : sequencedCharacteristic
    let attMTU = manager.maximumUpdateValueLength(for: characteristic) + 3
    let clock = ContinuousClock()
    let start = clock.now
    var values: ValueSource
    do {
      values = try ValueSource(bytes: bytes, framing: framing, attMTU: attMTU)
    } catch {
      return .cut(sent: 0)
    }
    var handed = 0
    while let value = values.next {
      do {
        if let central {
          try await manager.send(value, for: characteristic, to: central)
        } else {
          try await manager.send(value, for: characteristic)
        }
      } catch {
        return .cut(sent: values.bytesSent)
      }
      values.markSent()
      handed += 1
      watch.progressed(to: handed)
      events.yield(.progress(framing, sent: values.bytesSent, total: bytes.count))
    }
    return .sent(clock.now - start)
  }

  /// The notification values of one message in either framing, made one at a time.
  struct ValueSource {
    private var chunker: TransferChunker?
    private var encoder: SequencedTransferEncoder?

    /// - Throws: ``BluetoothError/Code/mtuTooSmall`` for an MTU below 23 or ``BluetoothError/Code/messageTooLarge`` over the framing's limit.
    init(bytes: [UInt8], framing: Framing, attMTU: Int) throws(BluetoothError) {
      switch framing {
      case .plain: chunker = try TransferChunker(bytes: bytes, attMTU: attMTU)
      case .sequenced: encoder = try SequencedTransferEncoder(bytes: bytes, attMTU: attMTU)
      }
    }

    /// The value to send now, or `nil` when all were sent.
    var next: [UInt8]? { chunker?.nextChunk ?? encoder?.nextFrame?.bytes }

    /// Message bytes covered by the values sent so far.
    var bytesSent: Int { chunker?.bytesSent ?? encoder?.bytesSent ?? 0 }

    /// Records that `next` was sent.
    mutating func markSent() {
      chunker?.markSent()
      encoder?.markSent()
    }
  }
}
