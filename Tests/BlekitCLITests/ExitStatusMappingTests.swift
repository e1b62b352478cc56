// The CLI's one error-to-exit-status table, row by row: every BLEKit error code and case, the
// broker's errors, and errors that pass through; every status it gives is documented, and the
// help and the manual list the documented table.

import ArgumentParsing
import BlueZ
import Fleet
import Foundation
import Testing

@testable import BLEKit
@testable import blekit

/// One row: an error in, the status out (as ExitStatus's documentation says it should be).
struct ExitRow: Sendable, CustomTestStringConvertible {
  let label: String
  let error: any Error
  let status: ArgumentParsing.ExitStatus

  init(_ label: String, _ error: any Error, _ status: ArgumentParsing.ExitStatus) {
    self.label = label
    self.error = error
    self.status = status
  }

  var testDescription: String { "\(label) -> \(status.rawValue)" }
}

extension ExitRow {
  static func bluetooth(_ code: BluetoothError.Code, _ status: ArgumentParsing.ExitStatus)
    -> ExitRow
  {
    ExitRow("BluetoothError.\(code)", BluetoothError(code, "\(code) happened"), status)
  }

  static func cut(_ cause: BluetoothError.Code?, _ status: ArgumentParsing.ExitStatus) -> ExitRow {
    ExitRow(
      "transferInterrupted by \(cause.map { "\($0)" } ?? "nothing said")",
      BluetoothError.transferInterrupted(
        bytesReceived: 40, chunksReceived: 2, cause: cause.map { BluetoothError($0, "why") }),
      status)
  }

  static func wrapped(_ error: BlueZError, _ status: ArgumentParsing.ExitStatus) -> ExitRow {
    ExitRow("BlueZError \(error)", BluetoothError(error, while: "reading"), status)
  }

  static func l2cap(_ code: L2CAPError.Code, _ status: ArgumentParsing.ExitStatus) -> ExitRow {
    ExitRow("L2CAPError.\(code.rawValue)", L2CAPError(code, "\(code.rawValue)"), status)
  }

  /// Every BluetoothError code BLEKit declares, each with the status the documentation gives.
  static let bluetoothCodes: [ExitRow] = [
    .bluetooth(.serviceUnavailable, .bluetoothUnavailable),
    .bluetooth(.busLost, .bluetoothUnavailable),
    .bluetooth(.bus, .bluetoothUnavailable),
    .bluetooth(.adapterNotFound, .adapterNotFound),
    .bluetooth(.unauthorized, .permissionDenied),
    .bluetooth(.notPermitted, .permissionDenied),
    .bluetooth(.timeout, .timedOut),
    .bluetooth(.peripheralNotFound, .timedOut),
    .bluetooth(.notConfirmed, .timedOut),
    .bluetooth(.disconnected, .disconnected),
    .bluetooth(.transferInterrupted, .disconnected),
    .bluetooth(.advertisementTooLarge, .advertisementTooLarge),
    .bluetooth(.attributeNotFound, .notFound),
    .bluetooth(.notSupported, .notSupported),
    .bluetooth(.passiveScanUnavailable, .passiveScanUnavailable),
    .bluetooth(.bluez, .remoteError),
    .bluetooth(.connectionFailed, .remoteError),
    .bluetooth(.poweredOff, .failure),
    .bluetooth(.notReady, .failure),
    .bluetooth(.scanInProgress, .failure),
    .bluetooth(.notSubscribed, .failure),
    .bluetooth(.valueTooLong, .failure),
    .bluetooth(.system, .failure),
    // Stopped: the signal's status, 130 when there was none.
    .bluetooth(.cancelled, .interrupted),
    .bluetooth(.closed, .interrupted),
  ]

  /// Every L2CAPError code BLEKit declares.
  static let l2capCodes: [ExitRow] = [
    .l2cap(.unavailable, .adapterNotFound),
    .l2cap(.permissionDenied, .permissionDenied),
    .l2cap(.insufficientSecurity, .permissionDenied),
    .l2cap(.refused, .notFound),
    .l2cap(.timedOut, .timedOut),
    .l2cap(.linkLost, .disconnected),
    .l2cap(.closed, .disconnected),
    .l2cap(.addressInUse, .failure),
    .l2cap(.tooLarge, .failure),
    .l2cap(.system, .failure),
  ]

  static let others: [ExitRow] = [
    // A code a later BLEKit adds: an answer from BlueZ or the bus.
    .bluetooth(BluetoothError.Code(rawValue: "someLaterCode"), .remoteError),
    .l2cap(L2CAPError.Code(rawValue: "someLaterCode"), .failure),
    // A cut transfer exits as its cause says where the cause has a status of its own.
    .cut(.busLost, .bluetoothUnavailable),
    .cut(.serviceUnavailable, .bluetoothUnavailable),
    .cut(.adapterNotFound, .adapterNotFound),
    .cut(.disconnected, .disconnected),
    .cut(.timeout, .disconnected),
    .cut(.notSubscribed, .disconnected),
    .cut(nil, .disconnected),
    // bluetoothd's and the bus's errors as BLEKit wraps them.
    .wrapped(BlueZError(.busLost, "the connection is closed"), .bluetoothUnavailable),
    .wrapped(BlueZError(.serviceUnavailable, "not running"), .bluetoothUnavailable),
    .wrapped(BlueZError(.bus, "cannot connect to the system bus"), .bluetoothUnavailable),
    .wrapped(BlueZError(.accessDenied, "policy"), .permissionDenied),
    .wrapped(
      BlueZError(.notAuthorized, "no", name: "org.bluez.Error.NotAuthorized"), .permissionDenied),
    .wrapped(BlueZError(.notReady, "powered off", name: "org.bluez.Error.NotReady"), .failure),
    .wrapped(BlueZError(.inProgress, "busy", name: "org.bluez.Error.InProgress"), .remoteError),
    .wrapped(
      BlueZError(
        .failed, "Operation failed with ATT error: 0x0b", name: "org.bluez.Error.Failed"),
      .remoteError),
    .wrapped(BlueZError(.doesNotExist, "gone", name: "org.bluez.Error.DoesNotExist"), .notFound),
    // blekit's message over L2CAP.
    ExitRow("L2CAPMessageError.notAMessage", L2CAPMessageError.notAMessage("HTTP"), .unverified),
    ExitRow(
      "L2CAPMessageError.tooLarge", L2CAPMessageError.tooLarge(length: 9, limit: 8), .failure),
    ExitRow(
      "L2CAPMessageError.cut", L2CAPMessageError.cut(received: 1, expected: 9), .disconnected),
    ExitRow(
      "L2CAPMessageError.trailingBytes", L2CAPMessageError.trailingBytes(expected: 1, received: 9),
      .unverified),
    ExitRow(
      "L2CAPMessageError.checksumMismatch",
      L2CAPMessageError.checksumMismatch(expected: 1, actual: 2), .unverified),
    ExitRow(
      "L2CAPMessageError.notAcknowledged", L2CAPMessageError.notAcknowledged("closed"),
      .disconnected),
    ExitRow(
      "L2CAPMessageError.timedOut",
      L2CAPMessageError.timedOut(.idle(.seconds(5)), done: 1, total: 9), .disconnected),
    // The GATT transfer protocols.
    ExitRow("TransferError.mtuTooSmall", TransferError.mtuTooSmall(20), .failure),
    ExitRow(
      "TransferError.incomplete", TransferError.incomplete(bytesReceived: 1, chunksReceived: 1),
      .failure),
    ExitRow(
      "TransferError.invalidUTF8", TransferError.invalidUTF8(byteCount: 2, offset: 1), .failure),
    ExitRow("TransferError.messageTooLarge", TransferError.messageTooLarge(limit: 9), .failure),
    ExitRow("TransferError.malformedFrame", TransferError.malformedFrame("short"), .unverified),
    ExitRow("TransferError.unsupportedVersion", TransferError.unsupportedVersion(9), .unverified),
    ExitRow(
      "TransferError.lengthMismatch",
      TransferError.lengthMismatch(message: 1, expected: 3, actual: 2), .unverified),
    ExitRow(
      "TransferError.checksumMismatch",
      TransferError.checksumMismatch(message: 1, expected: 1, actual: 2), .unverified),
    ExitRow(
      "TransferError.tooManyMessagesInFlight", TransferError.tooManyMessagesInFlight(limit: 4),
      .failure),
    ExitRow(
      "TransferError.orderNotGuaranteed", TransferError.orderNotGuaranteed("EATT"), .unverified),
    ExitRow("TransferError.chunksMayBeLost", TransferError.chunksMayBeLost("full"), .unverified),
    // The broker.
    ExitRow("FleetError.invalidURL", FleetError(.invalidURL, "bad"), .usage),
    ExitRow("FleetError.invalidSetting", FleetError(.invalidSetting, "bad"), .failure),
    ExitRow("FleetError.unreachable", FleetError(.unreachable, "down"), .brokerUnavailable),
    ExitRow("FleetError.refused", FleetError(.refused, "no"), .brokerUnavailable),
    // An advertisement checked against the legacy limit before bluetoothd is asked.
    ExitRow(
      "AdvertisementTooLarge",
      AdvertisementTooLarge(
        size: AdvertisingPayload(manufacturerData: [0xFFFF: [UInt8](repeating: 0, count: 40)])
          .legacySize()),
      .advertisementTooLarge),
    // What a command already decided goes through as it is.
    ExitRow("CLIError", CLIError(.outputFailed, "full disk"), .outputFailed),
    ExitRow("UsageError", UsageError.invalid("bad"), .usage),
    ExitRow("CancellationError", CancellationError(), .interrupted),
  ]

  static let all = bluetoothCodes + l2capCodes + others
}

@Suite struct ExitStatusMappingTests {
  @Test(arguments: ExitRow.all)
  func everyRow(_ row: ExitRow) {
    #expect(ErrorReport(exitError(row.error)).status == row.status)
  }

  /// The codes `extension`s and the types themselves declare in Sources/BLEKit, by type.
  static func declaredCodes() throws -> (bluetooth: Set<String>, l2cap: Set<String>) {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    let root = parts.joined(separator: "/") + "/Sources/BLEKit"
    let declaration = try NSRegularExpression(
      pattern: #"static let \w+ = (?:Code|Self)\(rawValue: "(\w+)"\)"#)
    var bluetooth: Set<String> = []
    var l2cap: Set<String> = []
    let files = try #require(FileManager.default.enumerator(atPath: root))
    for case let file as String in files where file.hasSuffix(".swift") {
      let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
      let isL2CAP = file.hasSuffix("L2CAPError.swift")
      guard
        isL2CAP || text.contains("struct BluetoothError")
          || text.contains("extension BluetoothError.Code")
      else { continue }
      for match in declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        let name = String(text[Range(match.range(at: 1), in: text)!])
        if isL2CAP { l2cap.insert(name) } else { bluetooth.insert(name) }
      }
    }
    return (bluetooth, l2cap)
  }

  /// A code added to BLEKit without a row here and in the table fails this test, rather than
  /// falling silently to the table's default.
  @Test func everyDeclaredCodeHasARow() throws {
    let declared = try Self.declaredCodes()
    #expect(declared.bluetooth.count >= 25)
    #expect(declared.l2cap.count >= 10)
    #expect(Set(ExitStatusMapping.bluetooth.keys.map(\.rawValue)) == declared.bluetooth)
    #expect(
      Set(ExitRow.bluetoothCodes.map { ($0.error as! BluetoothError).code.rawValue })
        == declared.bluetooth)
    #expect(Set(ExitStatusMapping.l2cap.keys.map(\.rawValue)) == declared.l2cap)
    #expect(
      Set(ExitRow.l2capCodes.map { ($0.error as! L2CAPError).code.rawValue }) == declared.l2cap)
  }

  /// Every status the table can give is in the documented table that `--help` and the manual
  /// print.
  @Test func everyStatusTheTableGivesIsDocumented() {
    let documented = Set(ArgumentParsing.ExitStatus.documented.map(\.status))
    var given = Set(ExitRow.all.map { ErrorReport(exitError($0.error)).status })
    for outcome in ExitStatusMapping.bluetooth.values + [ExitStatusMapping.unlistedBluetoothCode] {
      if case .status(let status) = outcome { given.insert(status) }
    }
    given.formUnion(ExitStatusMapping.interruptionCauses.values)
    given.formUnion(ExitStatusMapping.l2cap.values)
    given.insert(ExitStatusMapping.unlistedL2CAPCode)
    given.insert(ExitStatusMapping.advertisementTooLarge)
    given.insert(ExitStatusMapping.droppedValues)
    #expect(given.subtracting(documented).isEmpty, "undocumented: \(given.subtracting(documented))")
    // The table gives most of them (and the rest come from commands' own checks).
    #expect(given.count >= 14)
  }

  /// `blekit --help` and `blekit --generate-manual` print ExitStatus.documented, row by row.
  @Test func helpAndManualListTheDocumentedTable() {
    #expect(Blekit.configuration.extraSections == [ArgumentParsing.ExitStatus.helpSection])
    let help = HelpFormatter.help(for: Blekit.self, path: ["blekit"])
    let page = ManualPage.page(for: Blekit.self)
    #expect(help.contains("EXIT STATUS:"))
    #expect(page.contains(".SH \"EXIT STATUS\""))
    for (status, meaning) in ArgumentParsing.ExitStatus.documented {
      let label = String(status.rawValue)
      let words = meaning.split(separator: " ").prefix(3).joined(separator: " ")
      #expect(
        help.split(separator: "\n").contains { $0.hasPrefix("  \(label) ") && $0.contains(words) },
        "help lacks \(label)")
      #expect(page.contains(".TP\n\\fB\(label)\\fR\n"), "manual lacks \(label)")
    }
  }

  /// The special lines stay: one line for a lost bus, whatever noticed it.
  @Test func specialLinesStay() {
    let lost = ErrorReport(exitError(BluetoothError(.busLost, "the connection is closed")))
    #expect(lost.message == busLostLine)
    let cut = ErrorReport(exitError(L2CAPMessageError.cut(received: 1, expected: 9)))
    #expect(cut.message.hasSuffix("; nothing was printed"))
    let url = ErrorReport(exitError(FleetError(.invalidURL, "no host")))
    #expect(url.message == "--mqtt: no host")
  }
}
