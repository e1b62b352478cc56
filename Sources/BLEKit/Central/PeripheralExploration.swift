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

/// Why one attribute's read failed, in bluetoothd's words.
public struct AttributeReadFailure: Error, Sendable, Hashable, CustomStringConvertible {
  /// BlueZ's D-Bus error name, e.g. `org.bluez.Error.NotPermitted`, when bluetoothd sent one.
  public var errorName: String?
  /// bluetoothd's message, e.g. `Read not permitted`.
  public var message: String

  public init(errorName: String?, message: String) {
    self.errorName = errorName
    self.message = message
  }

  /// Keeps the BlueZ error of a central error when there is one.
  init(_ error: BluetoothError) {
    if let bluez = error.bluez {
      self.init(errorName: bluez.name ?? bluez.code.rawValue, message: bluez.message)
    } else {
      self.init(errorName: nil, message: error.message)
    }
  }

  /// `Read not permitted (org.bluez.Error.NotPermitted)`.
  public var description: String {
    guard let errorName else { return message }
    return message.isEmpty ? errorName : "\(message) (\(errorName))"
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

extension Peripheral {
  /// Walks every service, characteristic and descriptor (in handle order) and reads values
  /// per `reads`. A read that fails is recorded on its attribute and the walk goes on.
  ///
  /// - Throws: ``BluetoothError/Code/disconnected`` when the link drops during the walk (the
  ///   remaining reads could not succeed); the discovery's errors.
  public func explore(reads: ExplorationReads = .all) async throws(BluetoothError)
    -> [ExploredService]
  {
    var result: [ExploredService] = []
    for service in try await services() {
      var characteristics: [ExploredCharacteristic] = []
      for characteristic in try await self.characteristics(for: service) {
        let wanted =
          switch reads {
          case .all: true
          case .readable: characteristic.properties.contains(.read)
          case .none: false
          }
        let value =
          wanted
          ? try await attempt { () throws(BluetoothError) in
            try await self.readValue(for: characteristic)
          } : .notRead
        var descriptors: [ExploredDescriptor] = []
        for descriptor in try await self.descriptors(for: characteristic) {
          let read =
            reads == .none
            ? .notRead
            : try await attempt { () throws(BluetoothError) in
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

  /// Runs one read; a failure becomes the attribute's result unless the link is gone.
  private func attempt(
    _ read: () async throws(BluetoothError) -> [UInt8]
  ) async throws(BluetoothError) -> AttributeReadResult {
    do throws(BluetoothError) {
      return .value(try await read())
    } catch {
      if error.code == .cancelled { throw error }
      let linkLost = [.disconnected, .peripheralNotFound, .serviceUnavailable].contains(error.code)
      let connected = await isConnected()
      if linkLost || !connected {
        throw BluetoothError(
          .disconnected, "\(identifier) disconnected during the exploration: \(error)",
          bluez: error.bluez)
      }
      return .failed(AttributeReadFailure(error))
    }
  }
}
