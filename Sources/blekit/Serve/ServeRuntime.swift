// A loaded profile turned into BLEKit services: each characteristic with its value producer,
// its stored value (a fixed value a central overwrote), and its blob-read continuations.

import BLEKit
import Synchronization

/// The published side of one profile characteristic.
final class ServedCharacteristic: Sendable {
  let profile: ServeProfile.Characteristic
  let service: BluetoothUUID
  let characteristic: MutableCharacteristic
  /// Values for reads (nil when not readable).
  let reads: ServeValueProducer?
  /// Values for the periodic notifier.
  let pushes: ServeValueProducer?

  struct State {
    /// A fixed value a central wrote over (reads return it).
    var stored: [UInt8]?
    /// The value each central's long read continues (produced at its offset-0 read).
    var reading = ReadContinuations()
  }
  /// Shared with the read and write handlers.
  final class Box: Sendable {
    let state = Mutex(State())
  }
  private let box = Box()

  init(
    _ profile: ServeProfile.Characteristic, service: BluetoothUUID, output: ServeOutput
  ) {
    self.profile = profile
    self.service = service
    let reads = profile.value.map(ServeValueProducer.init)
    self.reads = reads
    if case .periodic(_, let value) = profile.notifier {
      pushes = ServeValueProducer(value)
    } else {
      pushes = nil
    }
    let box = self.box
    let storesWrites: Bool
    if case .fixed = profile.value { storesWrites = true } else { storesWrites = false }
    var onRead: (@Sendable (ATTReadRequest) async throws(BluetoothError) -> [UInt8])?
    if let refusal = profile.readError {
      // A cloned device's refusal: the same ATT error at every read. For the security errors
      // bluetoothd answers an insecure link itself (the permission added below).
      onRead = { @Sendable _ throws(BluetoothError) in throw refusal.attError }
    } else if let reads {
      onRead = { @Sendable request throws(BluetoothError) in
        let key = request.central?.identifier ?? ""
        if request.offset > 0, let continued = box.state.withLock({ $0.reading.value(for: key) }) {
          output.read(request, service: service, length: continued.count)
          return continued
        }
        let value: [UInt8]
        if let stored = box.state.withLock({ $0.stored }) {
          value = stored
        } else {
          do throws(ServeValueError) {
            value = try await reads.produce()
          } catch {
            writeStandardError(
              "blekit serve: read of \(profile.path) (\(profile.uuid.shortString)): "
                + "\(error.description)\n")
            throw .att(.unlikelyError, error.description)
          }
        }
        box.state.withLock { $0.reading.set(value, for: key) }
        output.read(request, service: service, length: value.count)
        return value
      }
    }
    let onWrite: @Sendable (ATTWriteRequest) async throws(BluetoothError) -> Void = {
      request throws(BluetoothError) in
      guard storesWrites else { return }
      try box.state.withLock { state throws(BluetoothError) in
        var value =
          state.stored ?? profile.value.flatMap { source in
            if case .fixed(let bytes) = source { return bytes }
            return nil
          } ?? []
        guard request.offset <= value.count else { throw .att(.invalidOffset) }
        value.replaceSubrange(request.offset..., with: request.value)
        guard value.count <= ServeProfile.maximumValueLength else {
          throw .att(.invalidAttributeValueLength)
        }
        state.stored = value
      }
    }
    characteristic = MutableCharacteristic(
      type: profile.uuid, properties: profile.properties,
      permissions: profile.permissions.union(profile.readError?.permission ?? []),
      descriptors: profile.descriptors.map {
        MutableDescriptor(type: $0.uuid, value: $0.value, writable: $0.writable)
      },
      onRead: onRead, onWrite: onWrite)
  }
}

extension ServedCharacteristic {
  /// Drops what `central`'s long reads would continue (it disconnected).
  func forget(_ central: String) {
    box.state.withLock { $0.reading.forget(central) }
  }

  /// How many centrals have a long read to continue (for tests).
  var continuedReads: Int { box.state.withLock { $0.reading.count } }
}

/// The value each central's long read continues, kept for at most ``limit`` centrals (the
/// oldest dropped first) and dropped when its central disconnects: addresses come and go (a
/// phone's resolvable private address changes every 15 minutes), and each would otherwise
/// keep up to 512 bytes for as long as blekit serves.
struct ReadContinuations: Sendable {
  /// 16: more than BlueZ's default of connected centrals at once on one controller.
  static let limit = 16
  private var values: [(central: String, value: [UInt8])] = []

  var count: Int { values.count }

  func value(for central: String) -> [UInt8]? {
    values.last { $0.central == central }?.value
  }

  mutating func set(_ value: [UInt8], for central: String) {
    forget(central)
    if values.count >= Self.limit { values.removeFirst(values.count - Self.limit + 1) }
    values.append((central, value))
  }

  mutating func forget(_ central: String) {
    values.removeAll { $0.central == central }
  }
}

/// Every service of a profile, ready to add to a ``PeripheralManager``.
struct ServeRuntime: Sendable {
  let services: [MutableService]
  let characteristics: [ServedCharacteristic]

  init(_ profile: ServeProfile, output: ServeOutput) {
    var services: [MutableService] = []
    var all: [ServedCharacteristic] = []
    for service in profile.services {
      let served = service.characteristics.map {
        ServedCharacteristic($0, service: service.uuid, output: output)
      }
      all += served
      services.append(
        MutableService(
          type: service.uuid, primary: service.primary,
          characteristics: served.map(\.characteristic)))
    }
    self.services = services
    self.characteristics = all
  }

  /// The served characteristic behind a published one.
  func served(_ characteristic: MutableCharacteristic) -> ServedCharacteristic? {
    characteristics.first { $0.characteristic === characteristic }
  }

  /// Drops what `central`'s long reads would continue, on every characteristic.
  func forget(_ central: String) {
    for served in characteristics { served.forget(central) }
  }

  /// The characteristic fed by standard input, if any.
  var standardInputFed: (ServedCharacteristic, ServeProfile.LineFormat)? {
    for served in characteristics {
      if case .standardInput(let format) = served.profile.notifier { return (served, format) }
    }
    return nil
  }
}
