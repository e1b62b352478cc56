// Reads and writes by UUID: the characteristic is looked up in the resolved services for the
// caller, for code that knows a profile's UUIDs and nothing else.
import Bluetooth

extension Peripheral {
  /// The first characteristic `uuid`, in service `service` when given, else in any service (in
  /// handle order).
  ///
  /// ```swift
  /// let heartRate = try await peripheral.characteristic(
  ///   BluetoothUUID(uint16: 0x2A37), in: BluetoothUUID(uint16: 0x180D))
  /// ```
  ///
  /// - Throws: ``BluetoothError`` `.attributeNotFound` when the peripheral has no such
  ///   characteristic (there, or at all); `.disconnected` when it is not connected.
  public func characteristic(_ uuid: BluetoothUUID, in service: BluetoothUUID? = nil)
    async throws(BluetoothError) -> RemoteCharacteristic
  {
    try await requireResolved()
    let services = service.map { Set([$0]) }
    let search = {
      self.resolvedServices(services).lazy.compactMap {
        self.resolvedCharacteristics([uuid], of: $0).first
      }.first
    }
    if let found = await lookingUntilExported(search, isComplete: { $0 != nil }) {
      return found
    }
    let place = service.map { " in service \($0)" } ?? ""
    throw BluetoothError(
      .attributeNotFound, "\(identifier) has no characteristic \(uuid)\(place)")
  }

  /// Reads characteristic `uuid` (see ``characteristic(_:in:)`` for the lookup), e.g.
  /// `try await peripheral.readValue(of: BluetoothUUID(uint16: 0x2A19))` for a battery level.
  public func readValue(of uuid: BluetoothUUID, in service: BluetoothUUID? = nil)
    async throws(BluetoothError) -> [UInt8]
  {
    try await readValue(for: characteristic(uuid, in: service))
  }

  /// Writes characteristic `uuid` (see ``characteristic(_:in:)`` for the lookup and
  /// ``writeValue(_:for:type:)`` for the write).
  public func writeValue(
    _ value: [UInt8], to uuid: BluetoothUUID, in service: BluetoothUUID? = nil,
    type: CharacteristicWriteType = .withResponse
  ) async throws(BluetoothError) {
    try await writeValue(value, for: characteristic(uuid, in: service), type: type)
  }
}
