// BlekitUUID: the UUIDs of the services that blekit serves and looks for.

/// UUIDs used by blekit's transfer service.
///
/// The service and the plain characteristic are those of Apple's "Transferring Data Between
/// Bluetooth Low Energy Devices" sample, so blekit interoperates with that sample and its
/// ports. The sequenced characteristic is blekit's own: it carries the same message in
/// sequenced, CRC-checked frames (see `SequencedTransfer` in BLEKit) and is chosen by a blekit
/// central when the peripheral offers it.
public enum BlekitUUID {
  /// The transfer service, `E20A39F4-73F5-4BC4-A12F-17D1AD07A961` (Apple's sample).
  public static let transferService = BluetoothUUID(
    high: 0xE20A_39F4_73F5_4BC4, low: 0xA12F_17D1_AD07_A961)

  /// The plain transfer characteristic, `08590F7E-DB05-467E-8757-72F6FAEB13D4` (Apple's
  /// sample): notify (chunks, then `EOM`) and write without response (the reply).
  public static let transferCharacteristic = BluetoothUUID(
    high: 0x0859_0F7E_DB05_467E, low: 0x8757_72F6_FAEB_13D4)

  /// blekit's sequenced transfer characteristic, `8eaae4b1-b2e1-4d09-b847-f21676e24277`:
  /// notify, in the sequenced framing that survives reordering across EATT bearers.
  public static let sequencedTransferCharacteristic = BluetoothUUID(
    high: 0x8EAA_E4B1_B2E1_4D09, low: 0xB847_F216_76E2_4277)

  /// blekit's read service, `8eaae4b2-b2e1-4d09-b847-f21676e24277`: holds the dynamic read
  /// characteristic of `blekit advertise --read-value/--read-clock`.
  public static let readService = BluetoothUUID(
    high: 0x8EAA_E4B2_B2E1_4D09, low: 0xB847_F216_76E2_4277)

  /// blekit's dynamic read characteristic, `8eaae4b3-b2e1-4d09-b847-f21676e24277`: read
  /// only; its value is produced when a read request arrives, and read-blob offsets apply.
  public static let readCharacteristic = BluetoothUUID(
    high: 0x8EAA_E4B3_B2E1_4D09, low: 0xB847_F216_76E2_4277)

  /// blekit's L2CAP service, `8eaae4b4-b2e1-4d09-b847-f21676e24277`: holds the L2CAP PSM
  /// characteristic of `blekit l2cap listen` and `blekit advertise --l2cap`.
  public static let l2capService = BluetoothUUID(
    high: 0x8EAA_E4B4_B2E1_4D09, low: 0xB847_F216_76E2_4277)

  /// Apple's L2CAP PSM characteristic, `ABDD3056-28FA-441D-A470-55A75A52553A`
  /// (CoreBluetooth's `CBUUIDL2CAPPSMCharacteristicString`): read only, the PSM of a
  /// published L2CAP channel as a little-endian UInt16.
  public static let l2capPSMCharacteristic = BluetoothUUID(
    high: 0xABDD_3056_28FA_441D, low: 0xA470_55A7_5A52_553A)

  /// Names for `AssignedNumbers` look-ups.
  static let names: [BluetoothUUID: String] = [
    transferService: "blekit Transfer Service",
    transferCharacteristic: "blekit Transfer Characteristic",
    sequencedTransferCharacteristic: "blekit Sequenced Transfer Characteristic",
    readService: "blekit Read Service",
    readCharacteristic: "blekit Read Characteristic",
    l2capService: "blekit L2CAP Service",
    l2capPSMCharacteristic: "L2CAP PSM (Apple)",
  ]
}
