// swift-tools-version:6.0
// A sample app package that tests its BLE code against BLEKitTesting, as an app developer
// would: blekit is a dependency by path, and the tests run in plain `swift test`.
import Foundation
import PackageDescription

// SwiftPM names a path dependency after its folder: blekit checked out as `blekit` is package
// "blekit". This sample lives inside the checkout (two folders up), whatever its folder is
// called, so it reads that name; an app next to a checkout named blekit writes "blekit".
let blekit = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
  .appendingPathComponent("../..").standardized.lastPathComponent

let package = Package(
  name: "TestedApp",
  platforms: [.macOS(.v14)],
  dependencies: [
    .package(path: "../..")
  ],
  targets: [
    .target(
      name: "HeartRateApp",
      dependencies: [.product(name: "BLEKit", package: blekit)]),
    .testTarget(
      name: "HeartRateAppTests",
      dependencies: [
        "HeartRateApp",
        .product(name: "BLEKit", package: blekit),
        .product(name: "BLEKitTesting", package: blekit),
      ]),
  ]
)
