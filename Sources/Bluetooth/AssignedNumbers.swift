// AssignedNumbers: names for common Bluetooth SIG 16-bit UUIDs and company identifiers, plus
// blekit's own UUIDs, for human-readable output.
//
// Source: Bluetooth SIG, "Assigned Numbers" (https://www.bluetooth.com/specifications/
// assigned-numbers/): section 3.4 "GATT Services", 3.7 "GATT Descriptors", 3.8 "GATT
// Characteristics" and 7.1 "Company Identifiers"; the company names were cross-checked against
// BlueZ's copy of that table (lib/bluetooth.c, bt_compidtostr). Only a small, common subset is
// listed: an unknown number simply has no name.

/// Look-ups from assigned numbers to their names.
public enum AssignedNumbers {
  /// The name of a service UUID: a SIG service or a blekit service.
  public static func serviceName(_ uuid: BluetoothUUID) -> String? {
    if let name = BlekitUUID.names[uuid] { return name }
    return uuid.uint16Value.flatMap { services[$0] }
  }

  /// The name of a characteristic UUID: a SIG characteristic or a blekit characteristic.
  public static func characteristicName(_ uuid: BluetoothUUID) -> String? {
    if let name = BlekitUUID.names[uuid] { return name }
    return uuid.uint16Value.flatMap { characteristics[$0] }
  }

  /// The name of a descriptor UUID.
  public static func descriptorName(_ uuid: BluetoothUUID) -> String? {
    uuid.uint16Value.flatMap { descriptors[$0] }
  }

  /// The name of any UUID in these tables, whatever its kind.
  public static func name(for uuid: BluetoothUUID) -> String? {
    serviceName(uuid) ?? characteristicName(uuid) ?? descriptorName(uuid)
  }

  /// The name of a company identifier (the key of advertised manufacturer data).
  public static func companyName(_ id: UInt16) -> String? {
    companies[id]
  }

  /// The Generic Attribute service (0x1801), which holds Service Changed and the server's
  /// feature characteristics.
  public static let genericAttributeService = BluetoothUUID(uint16: 0x1801)
  /// The Server Supported Features characteristic (0x2B3A): bit 0 of its first byte says the
  /// server supports EATT (Enhanced ATT bearers).
  public static let serverSupportedFeatures = BluetoothUUID(uint16: 0x2B3A)

  /// The company identifier reserved for testing: `0xFFFF`. FolkBears' temporary-ID
  /// advertisements use it.
  public static let testCompanyID: UInt16 = 0xFFFF

  /// SIG GATT services (Assigned Numbers 3.4).
  public static let services: [UInt16: String] = [
    0x1800: "Generic Access",
    0x1801: "Generic Attribute",
    0x1802: "Immediate Alert",
    0x1803: "Link Loss",
    0x1804: "Tx Power",
    0x1805: "Current Time",
    0x1806: "Reference Time Update",
    0x1807: "Next DST Change",
    0x1808: "Glucose",
    0x1809: "Health Thermometer",
    0x180A: "Device Information",
    0x180D: "Heart Rate",
    0x180E: "Phone Alert Status",
    0x180F: "Battery",
    0x1810: "Blood Pressure",
    0x1811: "Alert Notification",
    0x1812: "Human Interface Device",
    0x1813: "Scan Parameters",
    0x1814: "Running Speed and Cadence",
    0x1815: "Automation IO",
    0x1816: "Cycling Speed and Cadence",
    0x1818: "Cycling Power",
    0x1819: "Location and Navigation",
    0x181A: "Environmental Sensing",
    0x181B: "Body Composition",
    0x181C: "User Data",
    0x181D: "Weight Scale",
    0x181E: "Bond Management",
    0x181F: "Continuous Glucose Monitoring",
    0x1820: "Internet Protocol Support",
    0x1821: "Indoor Positioning",
    0x1822: "Pulse Oximeter",
    0x1823: "HTTP Proxy",
    0x1824: "Transport Discovery",
    0x1825: "Object Transfer",
    0x1826: "Fitness Machine",
    0x1827: "Mesh Provisioning",
    0x1828: "Mesh Proxy",
    0x183A: "Insulin Delivery",
    0x183B: "Binary Sensor",
    0x1844: "Volume Control",
    0x1846: "Coordinated Set Identification",
    0x184E: "Audio Stream Control",
    0x184F: "Broadcast Audio Scan",
    0x1850: "Published Audio Capabilities",
    0xFD6F: "Exposure Notification",
  ]

  /// SIG GATT characteristics (Assigned Numbers 3.8).
  public static let characteristics: [UInt16: String] = [
    0x2A00: "Device Name",
    0x2A01: "Appearance",
    0x2A02: "Peripheral Privacy Flag",
    0x2A03: "Reconnection Address",
    0x2A04: "Peripheral Preferred Connection Parameters",
    0x2A05: "Service Changed",
    0x2A06: "Alert Level",
    0x2A07: "Tx Power Level",
    0x2A08: "Date Time",
    0x2A09: "Day of Week",
    0x2A0A: "Day Date Time",
    0x2A0D: "DST Offset",
    0x2A0E: "Time Zone",
    0x2A0F: "Local Time Information",
    0x2A12: "Time Accuracy",
    0x2A13: "Time Source",
    0x2A14: "Reference Time Information",
    0x2A16: "Time Update Control Point",
    0x2A17: "Time Update State",
    0x2A18: "Glucose Measurement",
    0x2A19: "Battery Level",
    0x2A1C: "Temperature Measurement",
    0x2A1D: "Temperature Type",
    0x2A1E: "Intermediate Temperature",
    0x2A21: "Measurement Interval",
    0x2A22: "Boot Keyboard Input Report",
    0x2A23: "System ID",
    0x2A24: "Model Number String",
    0x2A25: "Serial Number String",
    0x2A26: "Firmware Revision String",
    0x2A27: "Hardware Revision String",
    0x2A28: "Software Revision String",
    0x2A29: "Manufacturer Name String",
    0x2A2A: "IEEE 11073-20601 Regulatory Certification Data List",
    0x2A2B: "Current Time",
    0x2A31: "Scan Refresh",
    0x2A32: "Boot Keyboard Output Report",
    0x2A33: "Boot Mouse Input Report",
    0x2A35: "Blood Pressure Measurement",
    0x2A37: "Heart Rate Measurement",
    0x2A38: "Body Sensor Location",
    0x2A39: "Heart Rate Control Point",
    0x2A3F: "Alert Status",
    0x2A49: "Blood Pressure Feature",
    0x2A4A: "HID Information",
    0x2A4B: "Report Map",
    0x2A4C: "HID Control Point",
    0x2A4D: "Report",
    0x2A4E: "Protocol Mode",
    0x2A4F: "Scan Interval Window",
    0x2A50: "PnP ID",
    0x2A6E: "Temperature",
    0x2A6F: "Humidity",
    0x2AA6: "Central Address Resolution",
    0x2AC9: "Resolvable Private Address Only",
    0x2B29: "Client Supported Features",
    0x2B2A: "Database Hash",
    0x2B3A: "Server Supported Features",
  ]

  /// SIG GATT descriptors (Assigned Numbers 3.7).
  public static let descriptors: [UInt16: String] = [
    0x2900: "Characteristic Extended Properties",
    0x2901: "Characteristic User Description",
    0x2902: "Client Characteristic Configuration",
    0x2903: "Server Characteristic Configuration",
    0x2904: "Characteristic Presentation Format",
    0x2905: "Characteristic Aggregate Format",
    0x2906: "Valid Range",
    0x2907: "External Report Reference",
    0x2908: "Report Reference",
    0x2909: "Number of Digitals",
    0x290A: "Value Trigger Setting",
    0x290B: "Environmental Sensing Configuration",
    0x290C: "Environmental Sensing Measurement",
    0x290D: "Environmental Sensing Trigger Setting",
    0x290E: "Time Trigger Setting",
  ]

  /// Company identifiers (Assigned Numbers 7.1), as advertised in manufacturer data.
  public static let companies: [UInt16: String] = [
    0x0000: "Ericsson Technology Licensing",
    0x0001: "Nokia Mobile Phones",
    0x0002: "Intel Corp.",
    0x0003: "IBM Corp.",
    0x0004: "Toshiba Corp.",
    0x0006: "Microsoft",
    0x0008: "Motorola",
    0x0009: "Infineon Technologies AG",
    0x000A: "Qualcomm Technologies International, Ltd. (formerly Cambridge Silicon Radio)",
    0x000D: "Texas Instruments Inc.",
    0x000F: "Broadcom Corporation",
    0x001D: "Qualcomm",
    0x0025: "NXP Semiconductors",
    0x0030: "ST Microelectronics",
    0x003F: "Bluetooth SIG, Inc",
    0x0046: "MediaTek, Inc.",
    0x0048: "Marvell Technology Group Ltd.",
    0x004C: "Apple, Inc.",
    0x0057: "Harman International Industries, Inc.",
    0x0059: "Nordic Semiconductor ASA",
    0x005D: "Realtek Semiconductor Corporation",
    0x0065: "Hewlett-Packard Company",
    0x006B: "Polar Electro OY",
    0x0075: "Samsung Electronics Co. Ltd.",
    0x0078: "Nike, Inc.",
    0x0087: "Garmin International, Inc.",
    0x009E: "Bose Corporation",
    0x00C4: "LG Electronics",
    0x00CD: "Microchip Technology Inc.",
    0x00D2: "Dialog Semiconductor B.V.",
    0x00E0: "Google",
    0x02E5: "Espressif Systems",
    0x038F: "Xiaomi Inc.",
    0xFFFF: "Reserved for testing (no company assigned)",
  ]
}
