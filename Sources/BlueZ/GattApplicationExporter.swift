// Turns a GattApplication value tree into exported D-Bus objects (GattService1,
// GattCharacteristic1, GattDescriptor1), every method guarded by the bluetoothd caller check.
import DBus
import Synchronization

/// The mutable side of one exported attribute: what bluetoothd set or started.
final class LocalAttributeState: Sendable {
  struct Values: Sendable {
    /// The handle bluetoothd allotted (it writes the `Handle` property after registering).
    var handle: UInt16 = 0
    var notifying = false
    var notifyAcquired = false
    var writeAcquired = false
  }
  let values = Mutex(Values())

  func read<T: Sendable>(_ body: (Values) -> T) -> T { values.withLock { body($0) } }
  func update(_ body: (inout Values) -> Void) { values.withLock { body(&$0) } }
}

struct GattApplicationExporter {
  let connection: DBusConnection
  let root: ObjectPath
  let callerCheck: BluetoothdCallerCheck
  /// State per exported path, filled while building.
  private(set) var states: [ObjectPath: LocalAttributeState] = [:]

  init(connection: DBusConnection, root: ObjectPath, callerCheck: BluetoothdCallerCheck) {
    self.connection = connection
    self.root = root
    self.callerCheck = callerCheck
  }

  /// Every object of the application with its path, parents before children.
  mutating func objects(for application: GattApplication) -> [(ObjectPath, ExportedObject)] {
    var result: [(ObjectPath, ExportedObject)] = []
    for (i, service) in application.services.enumerated() {
      let servicePath = GattApplication.path(root: root, service: i)
      result.append((servicePath, serviceObject(service, path: servicePath)))
      for (j, characteristic) in service.characteristics.enumerated() {
        let path = GattApplication.path(root: root, service: i, characteristic: j)
        result.append(
          (path, characteristicObject(characteristic, path: path, service: servicePath)))
        for (k, descriptor) in characteristic.descriptors.enumerated() {
          let descriptorPath = GattApplication.path(
            root: root, service: i, characteristic: j, descriptor: k)
          result.append(
            (descriptorPath, descriptorObject(descriptor, path: descriptorPath, owner: path)))
        }
      }
    }
    return result
  }

  // MARK: - Objects

  private mutating func serviceObject(_ service: LocalService, path: ObjectPath) -> ExportedObject {
    let state = LocalAttributeState()
    states[path] = state
    let uuid = service.uuid
    let primary = service.isPrimary
    return ExportedObject(interfaces: [
      ExportedInterface(
        name: LocalService.interface,
        properties: [
          ExportedProperty(name: "UUID", signature: "s", access: .read) { .string(uuid) },
          ExportedProperty(name: "Primary", signature: "b", access: .read) { .bool(primary) },
          ExportedProperty(name: "Includes", signature: "ao", access: .read) {
            .array(element: "o", [])
          },
          handleProperty(state),
        ])
    ])
  }

  private mutating func characteristicObject(
    _ characteristic: LocalCharacteristic, path: ObjectPath, service: ObjectPath
  ) -> ExportedObject {
    let state = LocalAttributeState()
    states[path] = state
    let uuid = characteristic.uuid
    let flags = characteristic.flags.map { DBusValue.string($0.rawValue) }
    var properties = [
      ExportedProperty(name: "UUID", signature: "s", access: .read) { .string(uuid) },
      ExportedProperty(name: "Service", signature: "o", access: .read) { .objectPath(service) },
      ExportedProperty(name: "Flags", signature: "as", access: .read) {
        .array(element: "s", flags)
      },
      handleProperty(state),
    ]
    if characteristic.canNotify {
      properties.append(
        ExportedProperty(name: "Notifying", signature: "b", access: .read) {
          .bool(state.read { $0.notifying })
        })
    }
    // Presence of these two tells bluetoothd to use AcquireNotify / AcquireWrite.
    if characteristic.acquireNotify != nil {
      properties.append(
        ExportedProperty(name: "NotifyAcquired", signature: "b", access: .read) {
          .bool(state.read { $0.notifyAcquired })
        })
    }
    if characteristic.acquireWrite != nil {
      properties.append(
        ExportedProperty(name: "WriteAcquired", signature: "b", access: .read) {
          .bool(state.read { $0.writeAcquired })
        })
    }
    // No `Value` property: a value is only ever given to bluetoothd (ReadValue's reply, a
    // notification). PropertiesChanged(Value) still reaches bluetoothd's proxy.

    let connection = self.connection
    let interface = LocalCharacteristic.interface
    var methods = [
      readMethod(characteristic.read),
      writeMethod(characteristic.write),
    ]
    let startNotify = characteristic.startNotify
    let stopNotify = characteristic.stopNotify
    let canNotify = characteristic.canNotify
    methods.append(
      guarded("StartNotify", in: "", out: "") { _ in
        guard canNotify else { throw GattRequestError.notSupported.dbusError }
        let wasOn = state.read { $0.notifying }
        state.update { $0.notifying = true }
        if !wasOn {
          try? connection.emitPropertiesChanged(
            path: path, interface: interface, changed: ["Notifying": .bool(true)])
        }
        await startNotify?()
        return []
      })
    methods.append(
      guarded("StopNotify", in: "", out: "") { _ in
        let wasOn = state.read { $0.notifying }
        state.update { $0.notifying = false }
        if wasOn {
          try? connection.emitPropertiesChanged(
            path: path, interface: interface, changed: ["Notifying": .bool(false)])
        }
        await stopNotify?()
        return []
      })
    // Confirm: a central acknowledged an indication sent through PropertiesChanged(Value).
    let confirm = characteristic.confirm
    methods.append(
      guarded("Confirm", in: "", out: "") { _ in
        await confirm?()
        return []
      })
    if let acquire = characteristic.acquireNotify {
      methods.append(
        acquireMethod("AcquireNotify", handler: acquire) {
          state.update { $0.notifyAcquired = true }
        }
      )
    }
    if let acquire = characteristic.acquireWrite {
      methods.append(
        acquireMethod("AcquireWrite", handler: acquire) { state.update { $0.writeAcquired = true } }
      )
    }
    return ExportedObject(interfaces: [
      ExportedInterface(name: interface, methods: methods, properties: properties)
    ])
  }

  private mutating func descriptorObject(
    _ descriptor: LocalDescriptor, path: ObjectPath, owner: ObjectPath
  ) -> ExportedObject {
    let state = LocalAttributeState()
    states[path] = state
    let uuid = descriptor.uuid
    let flags = descriptor.flags.map { DBusValue.string($0.rawValue) }
    return ExportedObject(interfaces: [
      ExportedInterface(
        name: LocalDescriptor.interface,
        methods: [readMethod(descriptor.read), writeMethod(descriptor.write)],
        properties: [
          ExportedProperty(name: "UUID", signature: "s", access: .read) { .string(uuid) },
          ExportedProperty(name: "Characteristic", signature: "o", access: .read) {
            .objectPath(owner)
          },
          ExportedProperty(name: "Flags", signature: "as", access: .read) {
            .array(element: "s", flags)
          },
          handleProperty(state),
        ])
    ])
  }

  // MARK: - Members

  /// `Handle` (read-write, uint16): 0 asks bluetoothd to pick one; it then writes it back.
  private func handleProperty(_ state: LocalAttributeState) -> ExportedProperty {
    let check = callerCheck
    return ExportedProperty(
      name: "Handle", signature: "q", access: .readWrite,
      get: { .uint16(state.read { $0.handle }) },
      set: { value, sender in
        try check.check(sender)
        guard let handle = value.uint16Value else {
          throw DBusError.remote(
            name: "org.freedesktop.DBus.Error.InvalidArgs", message: "Handle is a uint16")
        }
        state.update { $0.handle = handle }
      })
  }

  /// A method that first refuses every caller but bluetoothd.
  private func guarded(
    _ name: MemberName, in inSignature: Signature, out outSignature: Signature,
    _ body: @escaping @Sendable (MethodInvocation) async throws -> [DBusValue]
  ) -> ExportedMethod {
    let check = callerCheck
    return ExportedMethod(name: name, inSignature: inSignature, outSignature: outSignature) {
      invocation in
      try check.check(invocation.sender)
      return try await body(invocation)
    }
  }

  private func readMethod(_ handler: GattReadHandler?) -> ExportedMethod {
    guarded("ReadValue", in: "a{sv}", out: "ay") { invocation in
      guard let handler else { throw GattRequestError.notSupported.dbusError }
      let options = invocation.arguments.first?.stringVariantDictionary ?? [:]
      do throws(GattRequestError) {
        return [.bytes(try await handler(GattReadRequest(options: options)))]
      } catch {
        throw error.dbusError
      }
    }
  }

  private func writeMethod(_ handler: GattWriteHandler?) -> ExportedMethod {
    guarded("WriteValue", in: "aya{sv}", out: "") { invocation in
      guard let handler else { throw GattRequestError.notSupported.dbusError }
      let value = invocation.arguments.first?.bytesValue ?? []
      let options = invocation.arguments.dropFirst().first?.stringVariantDictionary ?? [:]
      do throws(GattRequestError) {
        try await handler(GattWriteRequest(value: value, options: options))
      } catch {
        throw error.dbusError
      }
      return []
    }
  }

  /// AcquireNotify / AcquireWrite: makes the socket pair, hands our end to the handler, and
  /// returns bluetoothd's end with the MTU.
  private func acquireMethod(
    _ name: MemberName, handler: @escaping GattAcquireHandler,
    acquired: @escaping @Sendable () -> Void
  ) -> ExportedMethod {
    guarded(name, in: "a{sv}", out: "hq") { invocation in
      let options = invocation.arguments.first?.stringVariantDictionary ?? [:]
      let mtu = max(23, Int(options[GattOption.mtu]?.uint16Value ?? 23))
      do throws(GattRequestError) {
        let (ours, theirs) = try makeSeqpacketPair()
        try await handler(
          GattAcquiredSocket(
            socket: ours, mtu: mtu, device: options[GattOption.device]?.objectPathValue,
            link: options[GattOption.link]?.stringValue))
        acquired()
        return [.unixFD(theirs), .uint16(UInt16(mtu))]
      } catch {
        throw error.dbusError
      }
    }
  }
}
