import BlueZ
import DBus
import Testing

// BlueZObjectTree's reading of a GetManagedObjects reply.

@Suite struct ManagedObjectsDecodingTests {
  @Test func aPathNamedTwiceKeepsItsLastEntryEvenAnEmptyOne() {
    let path: ObjectPath = "/org/bluez/hci0/dev_00_AA_01_01_00_01"
    let device = DBusValue.dictionary(
      key: "s", value: "a{sv}",
      [
        DBusDictEntry(
          key: .string(Device1.interface.rawValue),
          value: .dictionaryOfVariants(["Address": .string("00:AA:01:01:00:01")]))
      ])
    let nothing = DBusValue.dictionary(key: "s", value: "a{sv}", [])
    func reply(_ values: [DBusValue]) -> DBusValue {
      .dictionary(
        key: "o", value: "a{sa{sv}}",
        values.map { DBusDictEntry(key: .objectPath(path), value: $0) })
    }
    // Found by the bluez-readers fuzz target: the earlier entry used to survive an empty one.
    #expect(BlueZObjectTree.decodeManagedObjects(reply([device, nothing]))[path] == nil)
    #expect(BlueZObjectTree.decodeManagedObjects(reply([nothing, device]))[path] != nil)
  }
}
