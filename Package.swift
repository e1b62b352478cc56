// swift-tools-version:6.0
// blekit: Bluetooth Low Energy for Linux in Swift, over BlueZ's D-Bus API.
import PackageDescription

let strict: [SwiftSetting] = [
  .enableUpcomingFeature("ExistentialAny")
]

let package = Package(
  name: "blekit",
  platforms: [.macOS(.v14)],
  products: [
    .library(name: "BLEKit", targets: ["BLEKit"]),
    .library(name: "DBus", targets: ["DBus"]),
    .library(name: "BLEKitTesting", targets: ["BLEKitTesting"]),
    .executable(name: "blekit", targets: ["blekit"]),
  ],
  targets: [
    // libdbus-1 through pkg-config; the only place C is touched.
    .systemLibrary(
      name: "CDBus",
      pkgConfig: "dbus-1",
      providers: [.apt(["libdbus-1-dev"])]
    ),
    // libmosquitto through pkg-config: the MQTT client library (Debian libmosquitto-dev).
    .systemLibrary(
      name: "CMosquitto",
      pkgConfig: "libmosquitto",
      providers: [.apt(["libmosquitto-dev"])]
    ),
    // Linux headers Glibc's module lacks (epoll, eventfd): BLEKit's Reactor, through its
    // Syscalls.swift.
    .systemLibrary(name: "CLinux"),
    // A Swift D-Bus layer: connection, values, calls, signals, exported objects.
    .target(name: "DBus", dependencies: ["CDBus", "CLinux"], swiftSettings: strict),
    // Bluetooth value types with no bus behind them: UUIDs, addresses, assigned numbers.
    .target(name: "Bluetooth", swiftSettings: strict),
    // Typed org.bluez proxies and exported BlueZ objects.
    .target(name: "BlueZ", dependencies: ["DBus", "Bluetooth"], swiftSettings: strict),
    // CentralManager, PeripheralManager, the transfer service, advertising data.
    .target(
      name: "BLEKit", dependencies: ["Bluetooth", "BlueZ", "DBus", "CLinux"], swiftSettings: strict),
    // A simulated bluetoothd on a private dbus-daemon, for apps' unit tests.
    .target(
      name: "BLEKitTesting", dependencies: ["BLEKit", "Bluetooth", "BlueZ", "DBus"],
      swiftSettings: strict),
    // An MQTT publisher and subscriber over libmosquitto: URLs, reconnects, a bounded buffer.
    .target(name: "MQTT", dependencies: ["CMosquitto"], swiftSettings: strict),
    // The gateway logic: sighting payloads, topic layouts, rate limits, the fleet's merged table.
    // What a monitor counts: FolkBears temporary IDs, per-ID sighting statistics in a bounded
    // table (the `monitor` command's and the gateways' model, not part of BLEKit's core).
    .target(name: "Sightings", dependencies: ["BLEKit"], swiftSettings: strict),
    .target(
      name: "Fleet", dependencies: ["BLEKit", "Bluetooth", "JSON", "MQTT", "Sightings"],
      swiftSettings: strict),
    // JSON values, their one writer and one parser (the CLI's output, fleet payloads, serve's
    // profiles); no Foundation.
    .target(name: "JSON", swiftSettings: strict),
    // A small typed command-line parser (swift-argument-parser cannot be fetched here).
    .target(name: "ArgumentParsing", swiftSettings: strict),
    .executableTarget(
      name: "blekit", dependencies: ["BLEKit", "ArgumentParsing", "Fleet", "JSON", "Sightings"],
      swiftSettings: strict),
    // Examples/: small programs against BLEKit's public API (its tutorial and compile-time check).
    .executableTarget(
      name: "example-heart-rate-peripheral", dependencies: ["BLEKit"],
      path: "Examples/HeartRatePeripheral", swiftSettings: strict),
    .executableTarget(
      name: "example-heart-rate-central", dependencies: ["BLEKit"],
      path: "Examples/HeartRateCentral", swiftSettings: strict),
    .executableTarget(
      name: "example-transfer", dependencies: ["BLEKit"], path: "Examples/Transfer",
      swiftSettings: strict),
    .executableTarget(name: "dbus-bench", dependencies: ["DBus"], path: "bench/dbus/swift"),
    // A private dbus-daemon for tests (never outlives the test process).
    .target(name: "TestSupport", dependencies: ["DBus", "BlueZ"], path: "Tests/TestSupport"),
    .testTarget(name: "DBusTests", dependencies: ["DBus", "CDBus", "TestSupport"]),
    .testTarget(name: "BluetoothTests", dependencies: ["Bluetooth"]),
    .testTarget(name: "BlueZTests", dependencies: ["BlueZ", "Bluetooth", "DBus", "TestSupport"]),
    .testTarget(
      name: "BLEKitTests", dependencies: ["BLEKit", "BlueZ", "Bluetooth", "DBus", "TestSupport"]),
    .testTarget(
      name: "BLEKitTestingTests", dependencies: ["BLEKitTesting", "BLEKit", "Bluetooth"]),
    .testTarget(name: "JSONTests", dependencies: ["JSON"]),
    .testTarget(name: "ArgumentParsingTests", dependencies: ["ArgumentParsing", "TestSupport"]),
    .testTarget(name: "SightingsTests", dependencies: ["Sightings", "BLEKit", "TestSupport"]),
    .testTarget(
      name: "FleetTests",
      dependencies: ["Fleet", "JSON", "MQTT", "BLEKit", "Bluetooth", "TestSupport"]),
    .testTarget(
      name: "BlekitCLITests",
      dependencies: [
        "blekit", "BLEKit", "BlueZ", "Bluetooth", "DBus", "ArgumentParsing", "Fleet", "JSON",
        "Sightings",
        "TestSupport",
      ]),
  ]
)
