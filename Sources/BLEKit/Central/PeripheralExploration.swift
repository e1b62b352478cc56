// Exploration: walk a connected peripheral's whole GATT tree and read every value on the way.
import BlueZ
import Bluetooth

/// The outcome of reading one attribute during an exploration.
public enum AttributeReadResult: Sendable, Hashable {
  /// The value read.
  case value([UInt8])
  /// The read failed; the walk went on.
  case failed(AttributeReadFailure)
  /// The attribute was not read (the walk was asked to read only readable attributes).
  case notRead
}

/// Why one attribute's read failed, in bluetoothd's words, with the ATT error they stand for.
/// A value in an exploration's results (``AttributeReadResult/failed(_:)``), not an error
/// thrown.
public struct AttributeReadFailure: Sendable, Hashable, CustomStringConvertible {
  /// BlueZ's D-Bus error name, e.g. `org.bluez.Error.NotPermitted`, when bluetoothd sent one.
  public var errorName: String?
  /// bluetoothd's message, e.g. `Read not permitted`.
  public var message: String
  /// Whether the link dropped on this read (an exploration with reconnects then connected
  /// again and went on). A device whose security needs bluetoothd cannot meet (pairing fails,
  /// e.g. without an agent) is dropped by the kernel right after the refused read.
  public var droppedLink: Bool
  /// The ATT error the device answered with, as far as bluetoothd tells it: 0x02 for "Read
  /// not permitted", 0x05 for "Not paired" (bluetoothd says the same for Insufficient
  /// Encryption 0x0f and Encryption Key Size 0x0c), 0x08 for `NotAuthorized`, the code of
  /// "Operation failed with ATT error: 0xNN"; `nil` when the failure names none.
  public var attErrorCode: UInt8?

  /// A failure as bluetoothd reported it; ``attErrorCode`` is read from the name and text.
  public init(errorName: String?, message: String, droppedLink: Bool = false) {
    self.errorName = errorName
    self.message = message
    self.droppedLink = droppedLink
    attErrorCode = BlueZError(name: errorName, message: message).gattATTErrorCode
  }

  /// Keeps the BlueZ error of a central error when there is one.
  init(_ error: BluetoothError, droppedLink: Bool = false) {
    if let bluez = error.bluez {
      self.init(
        errorName: bluez.name ?? bluez.code.rawValue, message: bluez.message,
        droppedLink: droppedLink)
      attErrorCode = bluez.gattATTErrorCode
    } else {
      self.init(errorName: nil, message: error.message, droppedLink: droppedLink)
    }
  }

  /// What the device wants before it answers, when the failure says so (see
  /// ``AttributeAccessRequirement``); `nil` for any other failure.
  public var requirement: AttributeAccessRequirement? {
    AttributeAccessRequirement(attErrorCode: attErrorCode)
  }

  /// `Read not permitted (org.bluez.Error.NotPermitted)`.
  public var description: String {
    guard let errorName else { return message }
    return message.isEmpty ? errorName : "\(message) (\(errorName))"
  }
}

/// What a device wants before it answers a read, as bluetoothd reports the ATT error.
///
/// bluetoothd (src/gatt-client.c) answers `ReadValue` with `org.bluez.Error.NotPermitted`
/// "Not paired" for the ATT errors Insufficient Authentication (0x05), Insufficient
/// Encryption (0x0f) and Insufficient Encryption Key Size (0x0c), and with
/// `org.bluez.Error.NotAuthorized` for Insufficient Authorization (0x08); other ATT errors
/// come as `org.bluez.Error.Failed` "Operation failed with ATT error: 0xNN"
/// (``AttributeReadFailure/attErrorCode`` has the code either way).
public enum AttributeAccessRequirement: Sendable, Hashable {
  /// An encrypted link, and so a pairing (ATT 0x05, 0x0c, 0x0f; BlueZ "Not paired").
  case pairing
  /// The device's own authorization (ATT 0x08; `org.bluez.Error.NotAuthorized`): pairing
  /// alone may not be enough.
  case authorization

  /// The requirement an ATT error code names, or `nil`.
  public init?(attErrorCode: UInt8?) {
    switch attErrorCode {
    case 0x05?, 0x0C?, 0x0F?: self = .pairing
    case 0x08?: self = .authorization
    default: return nil
    }
  }
}

/// A descriptor and what reading it gave.
public struct ExploredDescriptor: Sendable, Hashable {
  public var descriptor: RemoteDescriptor
  public var read: AttributeReadResult
}

/// A characteristic, what reading it gave, and its descriptors.
public struct ExploredCharacteristic: Sendable, Hashable {
  public var characteristic: RemoteCharacteristic
  public var read: AttributeReadResult
  public var descriptors: [ExploredDescriptor]
}

/// A service and its characteristics.
public struct ExploredService: Sendable, Hashable {
  public var service: RemoteService
  public var characteristics: [ExploredCharacteristic]
}

/// Which attributes an exploration reads.
public enum ExplorationReads: Sendable, Hashable {
  /// Every characteristic and descriptor, readable or not: one the device
  /// refuses records its error instead of ending the exploration.
  case all
  /// Only characteristics whose flags allow reading, and every descriptor.
  case readable
  /// Nothing: the tree only.
  case none
}

/// How an exploration gets a link back that drops during it.
///
/// A device may drop the link over one attribute: when a read is refused for lack of
/// encryption, bluetoothd tries to raise the link's security, and when that pairing fails
/// (no agent, the user declines) the kernel disconnects. With reconnects, the exploration
/// connects again, records that attribute's failure and goes on with the rest.
public struct ExplorationReconnects: Sendable, Hashable {
  /// The most reconnections one exploration makes.
  public var maximum: Int
  /// The time all of them together may take, counted from the first.
  public var timeout: Duration

  /// Up to `maximum` reconnections within `timeout`.
  public init(maximum: Int, timeout: Duration) {
    self.maximum = maximum
    self.timeout = timeout
  }

  /// No reconnection: a link that drops ends the exploration.
  public static let none = ExplorationReconnects(maximum: 0, timeout: .zero)
}

extension Peripheral {
  /// Walks every service, characteristic and descriptor (in handle order) and reads values
  /// per `reads`. A read that fails is recorded on its attribute and the walk goes on.
  ///
  /// When the link drops during the walk and `reconnects` allows it, the peripheral is
  /// connected again (``CentralManager/connect(to:timeout:retry:)``) and the walk goes on: the
  /// read that was under way is recorded as failed with ``AttributeReadFailure/droppedLink``
  /// when its failure names a requirement (``AttributeReadFailure/requirement``, which a
  /// second attempt would only meet again), and is tried once more otherwise (a second drop
  /// is then recorded, and later reads that drop the link are not tried again: a device that
  /// drops an unpaired link over a value does so for each such value).
  ///
  /// - Throws: ``BluetoothError/Code/disconnected`` when the link drops during the walk and
  ///   may not (or could not) be connected again; the discovery's errors.
  public func explore(
    reads: ExplorationReads = .all, reconnects: ExplorationReconnects = .none
  ) async throws(BluetoothError) -> [ExploredService] {
    var link = ExplorationLink(peripheral: self, allowance: reconnects)
    var result: [ExploredService] = []
    let services = try await link.step { () throws(BluetoothError) in try await self.services() }
    for service in services {
      var characteristics: [ExploredCharacteristic] = []
      let found = try await link.step { () throws(BluetoothError) in
        try await self.characteristics(for: service)
      }
      for characteristic in found {
        let wanted =
          switch reads {
          case .all: true
          case .readable: characteristic.properties.contains(.read)
          case .none: false
          }
        let value =
          wanted
          ? try await link.read { @Sendable () throws(BluetoothError) in
            try await self.readValue(for: characteristic)
          } : .notRead
        var descriptors: [ExploredDescriptor] = []
        let listed = try await link.step { () throws(BluetoothError) in
          try await self.descriptors(for: characteristic)
        }
        for descriptor in listed {
          let read =
            reads == .none
            ? .notRead
            : try await link.read { @Sendable () throws(BluetoothError) in
              try await self.readValue(for: descriptor)
            }
          descriptors.append(ExploredDescriptor(descriptor: descriptor, read: read))
        }
        characteristics.append(
          ExploredCharacteristic(
            characteristic: characteristic, read: value, descriptors: descriptors))
      }
      result.append(ExploredService(service: service, characteristics: characteristics))
    }
    return result
  }
}

/// An exploration's link: notices when it dropped and connects again within the allowance.
private struct ExplorationLink {
  let peripheral: Peripheral
  let allowance: ExplorationReconnects
  var used = 0
  var deadline: ContinuousClock.Instant?
  /// Whether a read that dropped the link is tried again; no longer once one has dropped it
  /// twice.
  var retriesDrops = true

  init(peripheral: Peripheral, allowance: ExplorationReconnects) {
    self.peripheral = peripheral
    self.allowance = allowance
  }

  /// How long bluetoothd gets to report a dropped link as disconnected (before connecting
  /// again, and after a bare "Operation failed" read): it signals `Connected = false` right
  /// after the kernel's Disconnection Complete, which follows a failed pairing at once.
  static let settleTime: Duration = .seconds(2)

  /// Whether `error` (or the state right after it) says the link is gone.
  func linkLost(_ error: BluetoothError) async -> Bool {
    [.disconnected, .peripheralNotFound, .serviceUnavailable].contains(error.code)
      ? true : !(await peripheral.isConnected())
  }

  /// How long an empty value is watched for a drop right after it. bluetoothd 5.66 answers a
  /// read that the link's loss ended (shared/att.c hands the request no error code) with an
  /// empty value, not an error (src/gatt-client.c, `async_dbus_op_reply`): such an empty
  /// value is no value. Its answer and its `Connected = false` come from the same
  /// disconnection, so the watch is short: every empty value of a healthy link costs it.
  static let emptyValueWatch: Duration = .milliseconds(500)

  /// Whether the link goes down within `limit` (by default `settleTime`). bluetoothd answers
  /// a read whose security change failed with a bare `org.bluez.Error.Failed` ("Operation
  /// failed": the ATT request ended without a response), which can come just before the
  /// kernel disconnects.
  func dropsSoon(within limit: Duration = settleTime) async -> Bool {
    let path = peripheral.identifier.path
    let (snapshot, _, events) = peripheral.objects.subscribe()
    guard let properties = snapshot[path]?[Device1.interface],
      properties[Device1.connected.name]?.boolValue == true
        || properties[Device1.servicesResolved.name]?.boolValue == true
    else { return true }
    let dropped = await firstMatch(in: events, within: limit) { event -> Bool? in
      switch event {
      case .propertiesChanged(let changedPath, let interface, _, _, let current)
      where changedPath == path && interface == Device1.interface:
        current[Device1.connected.name]?.boolValue == false ? true : nil
      case .interfacesRemoved(let removedPath, _) where removedPath == path: true
      case .serviceStopped: true
      default: nil
      }
    }
    return dropped ?? false
  }

  /// The error that ends the walk when the link is gone for good.
  func lost(_ error: BluetoothError) -> BluetoothError {
    if error.lostDuringExploration { return error }
    var lost = BluetoothError(
      .disconnected, "\(peripheral.identifier) disconnected during the exploration: \(error)",
      bluez: error.bluez)
    lost.lostDuringExploration = true
    return lost
  }

  /// Connects again after `error` dropped the link, or throws when the allowance is spent.
  mutating func reconnect(after error: BluetoothError) async throws(BluetoothError) {
    let now = ContinuousClock.now
    let deadline = self.deadline ?? now + allowance.timeout
    self.deadline = deadline
    guard used < allowance.maximum, deadline > now else { throw lost(error) }
    used += 1
    // Make sure the old link is gone (bluetoothd may not have signalled the drop yet).
    try? await peripheral.manager.disconnect(
      peripheral.identifier, timeout: min(Self.settleTime, deadline - now))
    do throws(BluetoothError) {
      _ = try await peripheral.manager.connect(
        to: peripheral.identifier, timeout: max(deadline - .now, .milliseconds(1)))
    } catch {
      if error.code == .cancelled { throw error }
      var lost = BluetoothError(
        .disconnected,
        "\(peripheral.identifier) disconnected during the exploration (\(error)) and "
          + "connecting again failed: \(error.message)", bluez: error.bluez)
      lost.lostDuringExploration = true
      throw lost
    }
  }

  /// Runs a step of the walk (a listing); when the link is gone, connects again and runs it
  /// once more.
  mutating func step<T>(
    _ work: () async throws(BluetoothError) -> T
  ) async throws(BluetoothError) -> T {
    do throws(BluetoothError) {
      return try await work()
    } catch {
      if error.code == .cancelled || error.code == .busLost { throw error }
      guard await linkLost(error) else { throw error }
      try await reconnect(after: error)
      do throws(BluetoothError) {
        return try await work()
      } catch {
        throw await linkLost(error) ? lost(error) : error
      }
    }
  }

  /// One read, raced against the link's loss. bluetoothd 5.66 may leave a call that is
  /// pending when the link drops unanswered (it does so with AcquireNotify, see
  /// `Peripheral.untilLinkLoss(_:_:)`), and its answer to a read cut by its own failed
  /// pairing can come just after the drop: so after a drop the read gets `settleTime`
  /// more, then is given up (its call cancelled) with the loss.
  func raced(
    _ read: @escaping @Sendable () async throws(BluetoothError) -> [UInt8]
  ) async throws(BluetoothError) -> [UInt8] {
    let (_, _, events) = peripheral.objects.subscribe()
    let path = peripheral.identifier.path
    let name = peripheral.identifier.description
    let tree = peripheral.objects
    let outcome = await withTaskGroup(of: ReadRace.self) { group in
      group.addTask {
        do throws(BluetoothError) {
          return .answered(.success(try await read()))
        } catch {
          return .answered(.failure(error))
        }
      }
      group.addTask {
        guard
          let loss = await Peripheral.waitForLinkLoss(
            events, device: path, name: name, tree: tree)
        else { return .watchEnded }
        try? await Task.sleep(for: Self.settleTime)
        return .lost(loss)
      }
      defer { group.cancelAll() }
      while let next = await group.next() {
        // A watch that ended without a loss leaves the read to answer.
        if case .watchEnded = next { continue }
        return next
      }
      return .watchEnded
    }
    switch outcome {
    case .answered(.success(let value)):
      return value
    case .answered(.failure(let error)):
      throw error
    case .lost(let loss):
      throw BluetoothError(
        loss.code, "\(loss.message) before the read was answered", bluez: loss.bluez)
    case .watchEnded:
      throw BluetoothError(.cancelled, "the read was cancelled")
    }
  }

  /// Runs one read; a failure becomes the attribute's result. When the link is gone, it
  /// connects again (or throws); the read is tried once more unless its failure names what
  /// the device requires.
  mutating func read(
    _ read: @escaping @Sendable () async throws(BluetoothError) -> [UInt8]
  ) async throws(BluetoothError) -> AttributeReadResult {
    var tried = 0
    var drop: AttributeReadFailure?
    while true {
      tried += 1
      do throws(BluetoothError) {
        let value = try await raced(read)
        guard value.isEmpty, allowance.maximum > 0, await dropsSoon(within: Self.emptyValueWatch)
        else { return .value(value) }
        throw BluetoothError(
          .disconnected,
          "\(peripheral.identifier) disconnected as bluetoothd answered the read with an empty "
            + "value (its answer to a read the drop ended)")
      } catch {
        if error.code == .cancelled || error.code == .busLost { throw error }
        // bluetoothd 5.82 retries a read refused for security with raised security itself
        // (shared/att.c); when that pairing fails and the link drops, the read is left
        // unanswered and still pending in bluetoothd, which refuses the same read on the
        // new link with InProgress, or leaves it unanswered too until the GATT call limit
        // (both seen on Debian 13's 5.82, the second on 2026-12-07). Either answer is the
        // drop's, not a failure of its own.
        if let drop, error.bluez?.code == .inProgress || error.code == .timeout {
          retriesDrops = false
          return .failed(drop)
        }
        let plain = AttributeReadFailure(error)
        var lost = await linkLost(error)
        if !lost, allowance.maximum > 0, plain.requirement == nil,
          plain.errorName == "org.bluez.Error.Failed"
        {
          lost = await dropsSoon()
        }
        guard lost else { return .failed(plain) }
        let failure = AttributeReadFailure(error, droppedLink: true)
        drop = failure
        try await reconnect(after: error)
        if tried == 2 { retriesDrops = false }
        if failure.requirement != nil || tried == 2 || !retriesDrops { return .failed(failure) }
      }
    }
  }
}

/// Which came first in `ExplorationLink.raced(_:)`: the read's answer, or the link's loss
/// (and `ExplorationLink.settleTime` after it); `watchEnded` when the watch ended without one.
private enum ReadRace: Sendable {
  case answered(Result<[UInt8], BluetoothError>)
  case lost(BluetoothError)
  case watchEnded
}
