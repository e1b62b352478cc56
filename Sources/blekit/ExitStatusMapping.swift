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

/// The table, one part per error type, and ``exitError(_:)`` that applies it. A status chosen
/// here follows ExitStatus's documentation, the same for every command.
enum ExitStatusMapping {
  /// ``BluetoothError``'s codes, central and peripheral alike.
  static let bluetooth: [BluetoothError.Code: ExitOutcome] = [
    // bluetoothd is not there, or the bus under it failed or went away.
    .serviceUnavailable: .status(.bluetoothUnavailable),
    .busLost: .status(.bluetoothUnavailable),
    .bus: .status(.bluetoothUnavailable),
    .adapterNotFound: .status(.adapterNotFound),
    .unauthorized: .status(.permissionDenied),
    .notPermitted: .status(.permissionDenied),
    // Nothing found in time (bluetoothd does not know the device, or it vanished while
    // connecting), or an operation that timed out.
    .timeout: .status(.timedOut),
    .peripheralNotFound: .status(.timedOut),
    .notConfirmed: .status(.timedOut),
    .disconnected: .status(.disconnected),
    // Refined by its cause (``interruptionCauses``).
    .transferInterrupted: .status(.disconnected),
    .advertisementTooLarge: .status(.advertisementTooLarge),
    .attributeNotFound: .status(.notFound),
    .notSupported: .status(.notSupported),
    .passiveScanUnavailable: .status(.passiveScanUnavailable),
    // bluetoothd's own answers.
    .bluez: .status(.remoteError),
    .connectionFailed: .status(.remoteError),
    // blekit's own checks and the adapter's state: no more specific status.
    .poweredOff: .status(.failure),
    .notReady: .status(.failure),
    .scanInProgress: .status(.failure),
    .notSubscribed: .status(.failure),
    .valueTooLong: .status(.failure),
    .system: .status(.failure),
    .cancelled: .cancelled,
    .closed: .cancelled,
  ]

  /// A ``BluetoothError`` code without a row (one a later BLEKit adds): BlueZ's or the bus's
  /// answer.
  static let unlistedBluetoothCode = ExitOutcome.status(.remoteError)

  /// A transfer cut by one of these causes exits as the cause says; by any other (the peer
  /// left or unsubscribed, the link went silent past a limit, unknown) it was cut short (7).
  static let interruptionCauses: [BluetoothError.Code: ExitStatus] = [
    .busLost: .bluetoothUnavailable,
    .serviceUnavailable: .bluetoothUnavailable,
    .adapterNotFound: .adapterNotFound,
  ]

  /// ``L2CAPError``'s codes (the kernel's errno behind them).
  static let l2cap: [L2CAPError.Code: ExitStatus] = [
    .unavailable: .adapterNotFound,
    .permissionDenied: .permissionDenied,
    .insufficientSecurity: .permissionDenied,
    .refused: .notFound,
    .timedOut: .timedOut,
    .linkLost: .disconnected,
    .closed: .disconnected,
    .addressInUse: .failure,
    .tooLarge: .failure,
    .system: .failure,
  ]

  /// An ``L2CAPError`` code without a row.
  static let unlistedL2CAPCode = ExitStatus.failure

  /// blekit's message over L2CAP; `nothingPrinted` when the receiver printed none of it (the
  /// line says so).
  static func l2capMessage(_ error: L2CAPMessageError) -> (status: ExitStatus, nothingPrinted: Bool)
  {
    switch error {
    // A transfer a limit ended is cut short too, as a GATT transfer's silence is.
    case .cut, .timedOut: (.disconnected, true)
    case .notAMessage, .trailingBytes, .checksumMismatch: (.unverified, true)
    case .tooLarge: (.failure, false)
    case .notAcknowledged: (.disconnected, false)
    }
  }

  /// The GATT transfer protocols' checks.
  static func transfer(_ error: TransferError) -> ExitStatus {
    switch error {
    case .orderNotGuaranteed, .chunksMayBeLost, .lengthMismatch, .checksumMismatch,
      .malformedFrame, .unsupportedVersion:
      .unverified
    case .mtuTooSmall, .incomplete, .invalidUTF8, .messageTooLarge, .tooManyMessagesInFlight:
      .failure
    }
  }

  /// The MQTT broker (`--mqtt` of scan, monitor and fleet), with the line's prefix.
  static func fleet(_ code: FleetError.Code) -> (status: ExitStatus, prefix: String) {
    switch code {
    case .invalidURL: (.usage, "--mqtt: ")
    case .invalidSetting: (.failure, "mqtt: ")
    case .unreachable, .refused: (.brokerUnavailable, "")
    }
  }

  /// An advertisement that does not fit (checked before bluetoothd is asked).
  static let advertisementTooLarge = ExitStatus.advertisementTooLarge

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
  case let error as L2CAPError:
    return CLIError(
      ExitStatusMapping.l2cap[error.code] ?? ExitStatusMapping.unlistedL2CAPCode, error.message)
  case let error as L2CAPMessageError:
    let (status, nothingPrinted) = ExitStatusMapping.l2capMessage(error)
    return CLIError(status, nothingPrinted ? "\(error); nothing was printed" : error.description)
  case let error as TransferError:
    return CLIError(ExitStatusMapping.transfer(error), error.description)
  case let error as FleetError:
    let (status, prefix) = ExitStatusMapping.fleet(error.code)
    return CLIError(status, prefix + error.message)
  case let error as AdvertisementTooLarge:
    return CLIError(ExitStatusMapping.advertisementTooLarge, error.description)
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
