// The CLI's one error-to-exit-status table, row by row: every BluetoothError code, the errors
// BLEKit makes for L2CAP, the transfer protocols and advertising (each with the status its
// former type had), the broker's errors, and errors that pass through; every status it gives
// is documented, and the help and the manual list the documented table with the table's codes.

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

  static func made(_ error: BluetoothError, _ status: ArgumentParsing.ExitStatus) -> ExitRow {
    ExitRow("BluetoothError \(error.code): \(error.message)", error, status)
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
    .bluetooth(.attError, .remoteError),
    .bluetooth(.connectionFailed, .remoteError),
    .bluetooth(.poweredOff, .failure),
    .bluetooth(.notReady, .failure),
    .bluetooth(.scanInProgress, .failure),
    .bluetooth(.notSubscribed, .failure),
    .bluetooth(.valueTooLong, .failure),
    .bluetooth(.system, .failure),
    // L2CAP channels (the kernel's errno behind them).
    .bluetooth(.l2capUnavailable, .adapterNotFound),
    .bluetooth(.insufficientSecurity, .permissionDenied),
    .bluetooth(.channelRefused, .notFound),
    .bluetooth(.linkLost, .disconnected),
    .bluetooth(.channelClosed, .disconnected),
    .bluetooth(.addressInUse, .failure),
    .bluetooth(.sduTooLarge, .failure),
    // blekit's message over L2CAP, and the GATT transfer protocols.
    .bluetooth(.notAcknowledged, .disconnected),
    .bluetooth(.notAMessage, .unverified),
    .bluetooth(.malformedFrame, .unverified),
    .bluetooth(.unsupportedVersion, .unverified),
    .bluetooth(.lengthMismatch, .unverified),
    .bluetooth(.checksumMismatch, .unverified),
    .bluetooth(.orderNotGuaranteed, .unverified),
    .bluetooth(.chunksMayBeLost, .unverified),
    .bluetooth(.mtuTooSmall, .failure),
    .bluetooth(.messageTooLarge, .failure),
    .bluetooth(.invalidUTF8, .failure),
    .bluetooth(.tooManyMessagesInFlight, .failure),
    // Advertising bytes and hex text.
    .bluetooth(.advertisingFieldTooShort, .failure),
    .bluetooth(.truncatedADStructure, .failure),
    .bluetooth(.unexpectedADType, .failure),
    .bluetooth(.invalidUUIDLength, .failure),
    .bluetooth(.invalidHexBytes, .failure),
    // Stopped: the signal's status, 130 when there was none.
    .bluetooth(.cancelled, .interrupted),
    .bluetooth(.closed, .interrupted),
  ]

  static let others: [ExitRow] = [
    // A code a later BLEKit adds: an answer from BlueZ or the bus.
    .bluetooth(BluetoothError.Code(rawValue: "someLaterCode"), .remoteError),
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
    // The errors BLEKit makes for L2CAP (each kernel errno as its former L2CAPError code
    // exited), blekit's message over L2CAP (former L2CAPMessageError) and the GATT transfer
    // protocols (former TransferError): the same statuses as before.
    .made(.fromErrno(EAFNOSUPPORT, "socket"), .adapterNotFound),
    .made(.fromErrno(EPERM, "bind"), .permissionDenied),
    .made(.fromErrno(EACCES, "bind"), .permissionDenied),
    .made(.fromErrno(EACCES, "connect"), .permissionDenied),
    .made(.fromErrno(ECONNREFUSED, "connect"), .notFound),
    .made(.fromErrno(ETIMEDOUT, "connect"), .timedOut),
    .made(.fromErrno(ENOTCONN, "read"), .disconnected),
    .made(.fromErrno(ECONNRESET, "read"), .disconnected),
    .made(.fromErrno(EADDRINUSE, "bind"), .failure),
    .made(.fromErrno(EMSGSIZE, "send"), .failure),
    .made(.fromErrno(EIO, "read"), .failure),
    .made(.notAMessage("HTTP"), .unverified),
    .made(.tooLarge(length: 9, limit: 8), .failure),
    .made(.cut(received: 1, sdus: 1, expected: 9), .disconnected),
    .made(.trailingBytes(expected: 1, received: 9), .unverified),
    .made(.checksumMismatch(expected: 1, actual: 2), .unverified),
    .made(.notAcknowledged("closed"), .disconnected),
    .made(.timedOut(.idle(.seconds(5)), done: 1, total: 9), .disconnected),
    .made(.mtuTooSmall(20), .failure),
    .made(.invalidUTF8(byteCount: 2, offset: 1), .failure),
    .made(.messageTooLarge(limit: 9), .failure),
    .made(.malformedFrame("short"), .unverified),
    .made(.unsupportedVersion(9), .unverified),
    .made(.lengthMismatch(message: 1, expected: 3, actual: 2), .unverified),
    .made(.checksumMismatch(message: 1, expected: 1, actual: 2), .unverified),
    .made(.tooManyMessagesInFlight(limit: 4), .failure),
    .made(.orderNotGuaranteed("EATT"), .unverified),
    .made(.chunksMayBeLost("full"), .unverified),
    // Former AdvertisingDecodingError and HexBytes.ParseError: no status of their own before
    // (any error's 1).
    .made(.tooShort(field: "manufacturer data", count: 1, needed: 2), .failure),
    .made(.truncatedStructure(offset: 3, declaredLength: 9, available: 2), .failure),
    .made(.unexpectedType(0xFF), .failure),
    .made(.invalidUUIDLength(3), .failure),
    .made(.invalidHexBytes("0g", offset: 1), .failure),
    // A reassembler's report of a message cut short (no command ends with it) is a cut
    // transfer like any other.
    .made(.incomplete(bytesReceived: 1, chunksReceived: 1), .disconnected),
    // The broker.
    ExitRow("FleetError.invalidURL", FleetError(.invalidURL, "bad"), .usage),
    ExitRow("FleetError.invalidSetting", FleetError(.invalidSetting, "bad"), .failure),
    ExitRow("FleetError.unreachable", FleetError(.unreachable, "down"), .brokerUnavailable),
    ExitRow("FleetError.refused", FleetError(.refused, "no"), .brokerUnavailable),
    // An advertisement checked against the legacy limit before bluetoothd is asked.
    .made(
      .advertisementTooLarge(
        AdvertisingPayload(manufacturerData: [0xFFFF: [UInt8](repeating: 0, count: 40)])
          .legacySize()),
      .advertisementTooLarge),
    // What a command already decided goes through as it is.
    ExitRow("CLIError", CLIError(.outputFailed, "full disk"), .outputFailed),
    ExitRow("UsageError", UsageError.invalid("bad"), .usage),
    ExitRow("CancellationError", CancellationError(), .interrupted),
  ]

  static let all = bluetoothCodes + others
}

@Suite struct ExitStatusMappingTests {
  @Test(arguments: ExitRow.all)
  func everyRow(_ row: ExitRow) {
    #expect(ErrorReport(exitError(row.error)).status == row.status)
  }

  /// The codes BluetoothError and its `extension`s declare in Sources/BLEKit.
  static func declaredCodes() throws -> Set<String> {
    var parts = #filePath.split(separator: "/", omittingEmptySubsequences: false)
    parts.removeLast(3)
    let root = parts.joined(separator: "/") + "/Sources/BLEKit"
    let declaration = try NSRegularExpression(
      pattern: #"static let \w+ = (?:Code|Self)\(rawValue: "(\w+)"\)"#)
    var bluetooth: Set<String> = []
    let files = try #require(FileManager.default.enumerator(atPath: root))
    for case let file as String in files where file.hasSuffix(".swift") {
      let text = try String(contentsOfFile: root + "/" + file, encoding: .utf8)
      guard
        text.contains("struct BluetoothError") || text.contains("extension BluetoothError.Code")
      else { continue }
      for match in declaration.matches(in: text, range: NSRange(text.startIndex..., in: text)) {
        bluetooth.insert(String(text[Range(match.range(at: 1), in: text)!]))
      }
    }
    return bluetooth
  }

  /// A code added to BLEKit without a row here and in the table fails this test, rather than
  /// falling silently to the table's default.
  @Test func everyDeclaredCodeHasARow() throws {
    let declared = try Self.declaredCodes()
    #expect(declared.count >= 50)
    #expect(Set(ExitStatusMapping.bluetooth.keys.map(\.rawValue)) == declared)
    #expect(
      Set(ExitRow.bluetoothCodes.map { ($0.error as! BluetoothError).code.rawValue }) == declared)
    // One row per code: a row written twice would hide which status is meant.
    #expect(ExitRow.bluetoothCodes.count == declared.count)
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
    given.insert(ExitStatusMapping.droppedValues)
    #expect(given.subtracting(documented).isEmpty, "undocumented: \(given.subtracting(documented))")
    // The table gives most of them (and the rest come from commands' own checks).
    #expect(given.count >= 14)
  }

  /// `blekit --help` and `blekit --generate-manual` print ExitStatus.documented, row by row.
  @Test func helpAndManualListTheDocumentedTable() {
    #expect(Blekit.configuration.extraSections == [ExitStatusMapping.helpSection])
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

  /// The manual's EXIT STATUS comes from the table: each status's paragraph lists exactly the
  /// codes the table gives it (a row moved to another status moves in the page too), and help
  /// keeps the short documented lines.
  @Test func theManualListsEachCodeUnderItsStatus() {
    let page = ManualPage.page(for: Blekit.self).split(separator: "\n").map(String.init)
    let help = HelpFormatter.help(for: Blekit.self, path: ["blekit"])
    var listed: [String: ArgumentParsing.ExitStatus] = [:]
    for (status, _) in ArgumentParsing.ExitStatus.documented {
      guard let at = page.firstIndex(of: "\\fB\(status.rawValue)\\fR"), at + 1 < page.count,
        let range = page[at + 1].range(of: "BLEKit error codes: ")
      else { continue }
      let names = page[at + 1][range.upperBound...].dropLast().split(separator: ", ")
      for name in names { listed[String(name)] = status }
    }
    #expect(listed.count == ExitStatusMapping.bluetooth.count)
    for row in ExitRow.bluetoothCodes {
      let code = (row.error as! BluetoothError).code
      #expect(
        listed[code.rawValue] == row.status,
        "manual: \(code) under \(listed[code.rawValue].map { "\($0)" } ?? "nothing")")
    }
    #expect(!help.contains("BLEKit error codes"))
  }

  /// The special lines stay: one line for a lost bus, whatever noticed it.
  @Test func specialLinesStay() {
    let lost = ErrorReport(exitError(BluetoothError(.busLost, "the connection is closed")))
    #expect(lost.message == busLostLine)
    let cut = ErrorReport(
      exitError(BluetoothError.cut(received: 1, sdus: 1, expected: 9), note: "nothing was printed"))
    #expect(cut.message == "the channel ended after 1 of 9 bytes; nothing was printed")
    #expect(cut.status == .disconnected)
    let url = ErrorReport(exitError(FleetError(.invalidURL, "no host")))
    #expect(url.message == "--mqtt: no host")
  }
}
