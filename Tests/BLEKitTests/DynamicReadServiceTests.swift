// DynamicReadService: a value made per read at offset 0, and blob reads continuing the value
// the same central got.

import Bluetooth
import Synchronization
import Testing

@testable import BLEKit

@Suite struct DynamicReadServiceTests {
  func request(offset: Int, central: String) -> ATTReadRequest {
    ATTReadRequest(
      characteristic: BlekitUUID.readCharacteristic, central: Central(identifier: central),
      offset: offset, mtu: 23)
  }

  @Test func producesAtOffsetZeroAndContinuesBlobReads() async throws {
    let counter = Mutex(0)
    let service = DynamicReadService {
      let n = counter.withLock { value in
        value += 1
        return value
      }
      return Array("value \(n)".utf8)
    }
    #expect(service.service.uuid == BlekitUUID.readService)
    #expect(service.characteristic.properties.contains(.read))
    let onRead = try #require(service.characteristic.onRead)
    #expect(try await onRead(request(offset: 0, central: "/a")) == Array("value 1".utf8))
    // A blob read by the same central continues value 1, not a new one.
    #expect(try await onRead(request(offset: 3, central: "/a")) == Array("value 1".utf8))
    // Another central's first read is a new value; a fresh read at 0 makes another.
    #expect(try await onRead(request(offset: 0, central: "/b")) == Array("value 2".utf8))
    #expect(try await onRead(request(offset: 0, central: "/a")) == Array("value 3".utf8))
    #expect(try await onRead(request(offset: 2, central: "/b")) == Array("value 2".utf8))
  }

  @Test func secureMakesTheCharacteristicEncryptRead() {
    let open = DynamicReadService { [] }
    #expect(!open.characteristic.permissions.contains(.readEncryptionRequired))
    #expect(
      !open.characteristic.properties.gattFlags(permissions: open.characteristic.permissions)
        .contains(.encryptRead))
    let secure = DynamicReadService(requireEncryption: true) { [] }
    #expect(secure.characteristic.permissions.contains(.readEncryptionRequired))
    #expect(
      secure.characteristic.properties.gattFlags(permissions: secure.characteristic.permissions)
        == [.read, .encryptRead])
  }

  @Test func theManagerSliceHonoursOffsets() throws {
    let value = Array("0123456789".utf8)
    #expect(try slice(value, from: 4) == Array("456789".utf8))
    #expect(try slice(value, from: 10) == [])
    #expect(throws: (any Error).self) { try slice(value, from: 11) }
  }
}
