// The CLI's one table from error to exit status: every error type a command can end with, each
// code or case with its status. The numbers and their meanings are ExitStatusTable.swift's.

import ArgumentParsing
import BLEKit
import Fleet

/// What an error ends a command with.
enum ExitOutcome: Hashable, Sendable {
  /// This status, with the error's one line.
  case status(ExitStatus)
  /// A cancellation: the command was stopped (Ctrl-C, a signal) or its manager closed as it
  /// stopped. The signal's status is the exit status (130 when there was none).
  case cancelled
}

/// The table from ``BluetoothError``'s codes to exit statuses, and ``exitError(_:)`` that
/// applies it. A status chosen here follows ExitStatus's documentation, the same for every
/// command; the manual's EXIT STATUS section lists each status's codes from it
/// (``ExitStatusMapping/codes(for:)``).
enum ExitStatusMapping {
  /// ``BluetoothError``'s codes, central, peripheral, L2CAP, transfer and advertising alike.
  static let bluetooth: [BluetoothError.Code: ExitOutcome] = [
    // bluetoothd is not there, or the bus under it failed or went away.
    .serviceUnavailable: .status(.bluetoothUnavailable),
    .busLost: .status(.bluetoothUnavailable),
    .bus: .status(.bluetoothUnavailable),
    .adapterNotFound: .status(.adapterNotFound),
    // The kernel has no Bluetooth sockets, or no adapter with the address.
    .l2capUnavailable: .status(.adapterNotFound),
    .unauthorized: .status(.permissionDenied),
    .notPermitted: .status(.permissionDenied),
    .insufficientSecurity: .status(.permissionDenied),
    // Nothing found in time (bluetoothd does not know the device, or it vanished while
    // connecting), or an operation that timed out.
    .timeout: .status(.timedOut),
    .peripheralNotFound: .status(.timedOut),
    .notConfirmed: .status(.timedOut),
    .disconnected: .status(.disconnected),
    .linkLost: .status(.disconnected),
    .channelClosed: .status(.disconnected),
    .notAcknowledged: .status(.disconnected),
    // Refined by its cause (``interruptionCauses``).
    .transferInterrupted: .status(.disconnected),
    .advertisementTooLarge: .status(.advertisementTooLarge),
    .attributeNotFound: .status(.notFound),
    // Nothing listens on the PSM.
    .channelRefused: .status(.notFound),
    .notSupported: .status(.notSupported),
    .passiveScanUnavailable: .status(.passiveScanUnavailable),
    // A received message that cannot be vouched for.
    .orderNotGuaranteed: .status(.unverified),
    .chunksMayBeLost: .status(.unverified),
    .notAMessage: .status(.unverified),
    .malformedFrame: .status(.unverified),
    .unsupportedVersion: .status(.unverified),
    .lengthMismatch: .status(.unverified),
    .checksumMismatch: .status(.unverified),
    // bluetoothd's own answers.
    .bluez: .status(.remoteError),
    // A handler's ATT answer (a peripheral's; the central side's ATT errors come as bluez).
    .attError: .status(.remoteError),
    .connectionFailed: .status(.remoteError),
    // blekit's own checks and the adapter's state: no more specific status.
    .poweredOff: .status(.failure),
    .notReady: .status(.failure),
    .scanInProgress: .status(.failure),
    .notSubscribed: .status(.failure),
    .valueTooLong: .status(.failure),
    .system: .status(.failure),
    .addressInUse: .status(.failure),
    .sduTooLarge: .status(.failure),
    .mtuTooSmall: .status(.failure),
    .messageTooLarge: .status(.failure),
    .invalidUTF8: .status(.failure),
    .tooManyMessagesInFlight: .status(.failure),
    // Bytes or text BLEKit could not decode (the commands report bad input as usage errors
    // before this table).
    .advertisingFieldTooShort: .status(.failure),
    .truncatedADStructure: .status(.failure),
    .unexpectedADType: .status(.failure),
    .invalidUUIDLength: .status(.failure),
    .invalidHexBytes: .status(.failure),
    .cancelled: .cancelled,
    .closed: .cancelled,
  ]

  /// A ``BluetoothError`` code without a row (one a later BLEKit adds): BlueZ's or the bus's
  /// answer.
  static let unlistedBluetoothCode = ExitOutcome.status(.remoteError)

  /// The EXIT STATUS section of `--help` and of the manual: ExitStatus's documented table,
  /// and in the manual each status followed by the ``BluetoothError`` codes this table gives
  /// it, so the page cannot disagree with the table.
  static var helpSection: HelpSection {
    var manualText: [String: String] = [:]
    for (status, meaning) in ExitStatus.documented {
      let codes = codes(for: status)
      if !codes.isEmpty {
        manualText[String(status.rawValue)] =
          "\(meaning) BLEKit error codes: \(codes.joined(separator: ", "))."
      }
    }
    return HelpSection(
      title: ExitStatus.helpSection.title, rows: ExitStatus.helpSection.rows,
      manualText: manualText)
  }

  /// The codes the table gives `status`, by name; a cancellation's codes go with 130, the
  /// status of a cancellation without a signal.
  static func codes(for status: ExitStatus) -> [String] {
    bluetooth.compactMap { code, outcome in
      switch outcome {
      case .status(let given): given == status ? code.rawValue : nil
      case .cancelled: status == .interrupted ? code.rawValue : nil
      }
    }.sorted()
  }

  /// The status `code` ends a command with (a cancellation's when it stands for one).
  static func status(for code: BluetoothError.Code) -> ExitStatus {
    switch bluetooth[code] ?? unlistedBluetoothCode {
    case .status(let status): status
    case .cancelled: .interrupted
    }
  }

  /// A transfer cut by one of these causes exits as the cause says; by any other (the peer
  /// left or unsubscribed, the link went silent past a limit, unknown) it was cut short (7).
  static let interruptionCauses: [BluetoothError.Code: ExitStatus] = [
    .busLost: .bluetoothUnavailable,
    .serviceUnavailable: .bluetoothUnavailable,
    .adapterNotFound: .adapterNotFound,
  ]

  /// The MQTT broker (`--mqtt` of scan, monitor and fleet), with the line's prefix.
  static func fleet(_ code: FleetError.Code) -> (status: ExitStatus, prefix: String) {
    switch code {
    case .invalidURL: (.usage, "--mqtt: ")
    case .invalidSetting: (.failure, "mqtt: ")
    case .unreachable, .refused: (.brokerUnavailable, "")
    }
  }

  /// `clone`: the device has only services bluetoothd serves itself (GAP, GATT).
  static let nothingToClone = ExitStatus.notFound
  /// `clone -o FILE`: the file could not be created or written (as for standard output).
  static let cloneOutput = ExitStatus.outputFailed

  /// Values dropped because the command fell behind (standard output read too slowly): a
  /// notification stream's bound (`notify`, `explore --listen`) or the peripheral's events'
  /// (`serve`'s writes) was reached. What was printed is incomplete, as when standard output
  /// cannot be written.
  static let droppedValues = ExitStatus.outputFailed
}

/// The error a command ends with when it dropped values at a bound (``ExitStatusMapping/droppedValues``).
func droppedValuesError(_ line: String) -> CLIError {
  CLIError(ExitStatusMapping.droppedValues, line)
}

/// The error a command ends with for `error`, as ``exitError(_:)`` makes it, with `note` after
/// its line (e.g. "nothing was printed", from a command that printed nothing of what failed).
func exitError(_ error: any Error, note: String) -> any Error {
  guard error is BluetoothError, let report = exitError(error) as? CLIError else {
    return exitError(error)
  }
  return CLIError(report.exitStatus, "\(report.exitMessage); \(note)")
}

/// The error a command ends with for `error`: a ``CLIError`` with the table's status and the
/// error's line, or `CancellationError` for a cancellation. Any other error (a ``CLIError``
/// already, a usage error) goes on unchanged.
func exitError(_ error: any Error) -> any Error {
  switch error {
  case let error as BluetoothError:
    if error.code == .transferInterrupted { return interruptedTransferError(error) }
    switch ExitStatusMapping.bluetooth[error.code] ?? ExitStatusMapping.unlistedBluetoothCode {
    case .cancelled:
      return CancellationError()
    case .status(let status):
      // The same line whichever call or stream noticed first.
      return CLIError(status, error.code == .busLost ? busLostLine : error.message)
    }
  case let error as FleetError:
    let (status, prefix) = ExitStatusMapping.fleet(error.code)
    return CLIError(status, prefix + error.message)
  default:
    return error
  }
}

/// A cut transfer: the status of its cause when ``ExitStatusMapping/interruptionCauses`` has
/// one, else 7; the line says how far it got.
private func interruptedTransferError(_ error: BluetoothError) -> CLIError {
  let cut = error.interruptedTransfer
  let status = cut?.cause.flatMap { ExitStatusMapping.interruptionCauses[$0] } ?? .disconnected
  if cut?.cause == .busLost {
    return CLIError(
      status, "\(busLostLine); the transfer was cut after \(cut?.bytesReceived ?? 0) bytes")
  }
  // The message ends with the cause's, e.g. "(adapter hci0 was removed)".
  return CLIError(status, error.message)
}

/// The one line every command ends with when the system bus goes away (exit status 4).
let busLostLine = "lost the connection to the system bus"
