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
          do throws(BluetoothError) {
            whole = try await onRead(
              ATTReadRequest(
                characteristic: uuid, central: Central(request.device), offset: request.offset,
                mtu: request.mtu, link: LinkType(option: request.link)))
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
          offset: request.offset, withoutResponse: withoutResponse, mtu: request.mtu,
          link: LinkType(option: request.link))
        if request.prepareAuthorize { return }
        // With the app's events full, a write request only they would carry is refused: the
        // central learns its value did not land (PeripheralManagerEvents).
        if characteristic.onWrite == nil, !withoutResponse,
          channel.eventsContinuation.refusesWrite()
        {
          throw .failed("the app has \(channel.eventsContinuation.limit) events unread")
        }
        if let onWrite = characteristic.onWrite {
          do throws(BluetoothError) {
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
      // Indications need each central's confirmation: through a socket, bluetoothd reports
      // it only from 5.80 (0x01 on that central's socket; `Confirm` up to 5.75, nothing in
      // between), so before that they use the signal path and `Confirm`.
      if channel.usesSocket {
        acquireNotify = { socket throws(GattRequestError) in channel.acquired(socket) }
      }
    }

    var flags = properties.gattFlags(permissions: characteristic.permissions)
    // A writable User Description makes the characteristic "writable auxiliaries" (its
    // Extended Properties descriptor, which BlueZ adds, says so).
    if characteristic.descriptors.contains(where: {
      $0.isWritable && $0.uuid == BluetoothUUID(uint16: 0x2901)
    }) {
      flags.append(.writableAuxiliaries)
    }
    return LocalCharacteristic(
      uuid: uuid.uuidString,
      flags: flags,
      descriptors: characteristic.descriptors.map {
        localDescriptor($0, of: uuid, channel: channel)
      },
      read: read, write: write, startNotify: startNotify, stopNotify: stopNotify,
      acquireNotify: acquireNotify,
      confirm: properties.contains(.indicate) ? { @Sendable in channel.confirmed() } : nil)
  }

  /// The exported descriptor: reads served from its current value; writes, when it is
  /// writable, vetted by its `onWrite`, stored, and reported on `channel`'s events.
  static func localDescriptor(
    _ descriptor: MutableDescriptor, of characteristic: BluetoothUUID,
    channel: NotificationChannel
  ) -> LocalDescriptor {
    let current = descriptor.current
    var flags: [GattFlag] = [.read]
    var write: GattWriteHandler?
    if descriptor.isWritable {
      flags.append(.write)
      let onWrite = descriptor.onWrite
      let uuid = descriptor.uuid
      write = { request throws(GattRequestError) in
        let write = ATTWriteRequest(
          characteristic: characteristic, descriptor: uuid, central: Central(request.device),
          value: request.value, offset: request.offset, withoutResponse: false,
          mtu: request.mtu, link: LinkType(option: request.link))
        if request.prepareAuthorize { return }
        if let onWrite {
          do throws(BluetoothError) {
            try await onWrite(write)
          } catch {
            throw error.gattRequestError
          }
        }
        // A write at an offset (a long write's later piece) continues the stored value.
        var value = current.get()
        guard request.offset <= value.count else { throw .invalidOffset }
        value.replaceSubrange(request.offset..., with: request.value)
        current.set(value)
        channel.deliver(write)
      }
    }
    flags += descriptor.permissions.gattFlags(readable: true, writable: descriptor.isWritable)
    return LocalDescriptor(
      uuid: descriptor.uuid.uuidString, flags: flags,
      read: { request throws(GattRequestError) in
        try slice(current.get(), from: request.offset)
      },
      write: write)
  }
}

/// The part of `value` a read at `offset` returns; an offset past the end is refused, an
/// offset equal to the length reads nothing (ATT, Core Vol 3 Part F 3.4.4.5).
func slice(_ value: [UInt8], from offset: Int) throws(GattRequestError) -> [UInt8] {
  guard offset >= 0, offset <= value.count else { throw .invalidOffset }
  return Array(value[offset...])
}

extension NotificationChannel {
  /// Reports an accepted write (or counts its event dropped when the events are full).
  func deliver(_ write: ATTWriteRequest) {
    eventsContinuation.yieldWrite(write)
  }
}
