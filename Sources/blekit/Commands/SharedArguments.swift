// Arguments several commands declare alike, written once: the adapter, and the peripheral,
// service and connect timeout of the GATT commands (explore, read, write, notify).

import ArgumentParsing
import BLEKit

extension Option where Value == String {
  /// `--adapter NAME` (`-a`): the adapter a command uses; `example` is shown in the help.
  static func adapter(example: String = "hci0") -> Self {
    Self(
      "--adapter", short: "a", value: "NAME",
      help: "Adapter to use, e.g. \(example) (default hci0).")
  }

  /// `--service UUID` (`-s`): where a GATT command looks for its characteristic.
  static var characteristicService: Self {
    Self(
      "--service", short: "s", value: "UUID",
      help: "Look for the characteristic in this service only.")
  }

  /// `--descriptor UUID` (`-d`): read or write this descriptor of the characteristic.
  static var descriptor: Self {
    Self(
      "--descriptor", short: "d", value: "UUID",
      help: "Use this descriptor of the characteristic, e.g. 2901.")
  }
}

extension Argument where Value == String {
  /// `ADDRESS|NAME`: the peripheral a GATT command connects to.
  static var peripheral: Self { Self("ADDRESS|NAME", help: "The device's address or name.") }
}

extension DefaultedOption where Value == Duration {
  /// `--timeout SECONDS` (`-t`, default 20 s): how long finding and connecting may take.
  static var connectTimeout: Self {
    Self(
      "--timeout", short: "t", value: "SECONDS", default: .seconds(20),
      help: "Give up finding and connecting after this long.")
  }
}

/// The descriptor UUID given with `--descriptor`, if any.
func parseDescriptor(_ text: String?) throws(UsageError) -> BluetoothUUID? {
  guard let text else { return nil }
  return try parseAttributeUUID(text, label: "--descriptor")
}

/// The service UUID given with `--service`, if any.
func parseCharacteristicService(_ text: String?) throws(UsageError) -> BluetoothUUID? {
  guard let text else { return nil }
  return try parseAttributeUUID(text, label: "--service")
}
