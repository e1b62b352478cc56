// What a user of BLEKit needs from the modules below it, so that `import BLEKit` is enough.

// BluetoothUUID, BluetoothAddress, BlekitUUID, RSSIFilter, AssignedNumbers: the value types of
// BLEKit's signatures. Bluetooth is not a product of its own.
@_exported import Bluetooth
