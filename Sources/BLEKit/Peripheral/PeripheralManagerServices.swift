// How a MutableService becomes BlueZ's exported GATT objects: handlers for reads (with
// offsets), writes, subscriptions and the AcquireNotify socket.
import BlueZ
import Bluetooth

extension PeripheralManager {
  /// The exported characteristic for `channel`'s characteristic.
  static func localCharacteristic(for channel: NotificationChannel) -> LocalCharacteristic {
    let characteristic = channel.characteristic
    let properties = characteristic.properties
    let uuid = characteristic.uuid

    var read: GattReadHandler?
    if properties.contains(.read) {
      read = { request throws(GattRequestError) in
        channel.noteMTU(request.mtu)
        let whole: [UInt8]
        if let value = characteristic.value {
          whole = value
        } else if let onRead = characteristic.onRead {
          do throws(ATTError) {
            whole = try await onRead(
              ATTReadRequest(
                characteristic: uuid, central: Central(request.device), offset: request.offset,
                mtu: request.mtu))
          } catch {
            throw error.gattRequestError
          }
        } else {
          throw .notPermitted
        }
        return try slice(whole, from: request.offset)
      }
    }

    var write: GattWriteHandler?
    if properties.contains(.write) || properties.contains(.writeWithoutResponse) {
      write = { request throws(GattRequestError) in
        channel.noteMTU(request.mtu)
        let withoutResponse =
          request.type == .command
          || (request.type == nil && !properties.contains(.write))
        let write = ATTWriteRequest(
          characteristic: uuid, central: Central(request.device), value: request.value,
          offset: request.offset, withoutResponse: withoutResponse, mtu: request.mtu)
        if request.prepareAuthorize { return }
        if let onWrite = characteristic.onWrite {
          do throws(ATTError) {
            try await onWrite(write)
          } catch {
            throw error.gattRequestError
          }
        }
        channel.deliver(write)
      }
    }

    var startNotify: (@Sendable () async -> Void)?
    var stopNotify: (@Sendable () async -> Void)?
    var acquireNotify: GattAcquireHandler?
    if characteristic.canNotify {
      startNotify = { channel.startNotify() }
      stopNotify = { channel.stopNotify() }
      // Indications need a confirmation per value, which the socket cannot report back in
      // order; they use the signal path.
      if characteristic.usesNotifySocket && !properties.contains(.indicate) {
        acquireNotify = { socket throws(GattRequestError) in channel.acquired(socket) }
      }
    }

    return LocalCharacteristic(
      uuid: uuid.uuidString,
      flags: properties.gattFlags(permissions: characteristic.permissions),
      descriptors: characteristic.descriptors.map(localDescriptor),
      read: read, write: write, startNotify: startNotify, stopNotify: stopNotify,
      acquireNotify: acquireNotify)
  }

  static func localDescriptor(_ descriptor: MutableDescriptor) -> LocalDescriptor {
    let value = descriptor.value
    return LocalDescriptor(
      uuid: descriptor.uuid.uuidString, flags: [.read],
      read: { request throws(GattRequestError) in try slice(value, from: request.offset) })
  }
}

/// The part of `value` a read at `offset` returns; an offset past the end is refused, an
/// offset equal to the length reads nothing (ATT, Core Vol 3 Part F 3.4.4.5).
func slice(_ value: [UInt8], from offset: Int) throws(GattRequestError) -> [UInt8] {
  guard offset >= 0, offset <= value.count else { throw .invalidOffset }
  return Array(value[offset...])
}

extension NotificationChannel {
  /// Reports an accepted write.
  func deliver(_ write: ATTWriteRequest) {
    eventsContinuation.yield(.write(write))
  }
}
