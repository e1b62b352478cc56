// Every exit status blekit uses, in one table: the only place the numbers are written.

/// A process exit status. Every blekit command exits with one of the statuses below; scripts
/// can rely on them. `blekit --help` prints the same table from ``documented``.
///
/// | Status | Name                    | Meaning                                                  |
/// |-------:|-------------------------|----------------------------------------------------------|
/// |      0 | `success`               | The command did what was asked.                          |
/// |      1 | `failure`               | Any failure without a more specific status.              |
/// |      2 | `usage`                 | Bad command line: unknown command/option, bad value.     |
/// |      3 | `adapterNotFound`       | No such Bluetooth adapter, or no adapter at all.         |
/// |      4 | `bluetoothUnavailable`  | bluetoothd is not running or not on the system bus.      |
/// |      5 | `permissionDenied`      | The system bus, BlueZ or the device refused access.      |
/// |      6 | `timedOut`              | Nothing found in time, or an operation timed out.        |
/// |      7 | `disconnected`          | The peer disconnected or a transfer was cut short.       |
/// |      8 | `remoteError`           | BlueZ or D-Bus answered with an error.                   |
/// |      9 | `advertisementTooLarge` | The advertising data does not fit.                       |
/// |     10 | `notFound`              | No such service, characteristic or descriptor.           |
/// |     11 | `notSupported`          | The characteristic does not allow the operation.         |
/// |     12 | `unverified`            | The message's order is not guaranteed or it failed its checks. |
/// |     13 | `outputFailed`          | Standard output could not be written, or not fast enough. |
/// |     14 | `brokerUnavailable`     | The MQTT broker is unreachable or refused the client.    |
/// |     15 | `passiveScanUnavailable`| bluetoothd offers no passive scanning (needs --experimental). |
/// |    129 | `hangUp`                | Stopped by SIGHUP (its terminal or session went away).   |
/// |    130 | `interrupted`           | Stopped by SIGINT (Ctrl-C).                              |
/// |    143 | `terminated`            | Stopped by SIGTERM.                                      |
///
/// A command that treats Ctrl-C as its normal end (a monitor printing its summary) and
/// returns without error exits 0.
public struct ExitStatus: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
  /// The number the process exits with.
  public let rawValue: Int32

  /// Wraps an exit status number; prefer the named statuses.
  public init(rawValue: Int32) {
    self.rawValue = rawValue
  }

  /// 0: the command did what was asked.
  public static let success = ExitStatus(rawValue: 0)
  /// 1: any failure without a more specific status.
  public static let failure = ExitStatus(rawValue: 1)
  /// 2: bad command line: unknown command or option, missing or malformed value.
  public static let usage = ExitStatus(rawValue: 2)
  /// 3: the requested Bluetooth adapter does not exist, or there is none.
  public static let adapterNotFound = ExitStatus(rawValue: 3)
  /// 4: bluetoothd is not running or does not own `org.bluez` on the system bus.
  public static let bluetoothUnavailable = ExitStatus(rawValue: 4)
  /// 5: the system bus or BlueZ denied access (D-Bus policy, `NotPermitted`, `NotAuthorized`),
  /// or the device gives some values only to a paired or authorized central (`explore`
  /// finished its dump without them).
  public static let permissionDenied = ExitStatus(rawValue: 5)
  /// 6: nothing was found in time, or an operation timed out.
  public static let timedOut = ExitStatus(rawValue: 6)
  /// 7: the peer disconnected, or a transfer was cut before it completed.
  public static let disconnected = ExitStatus(rawValue: 7)
  /// 8: BlueZ or another D-Bus peer answered with an error not covered above.
  public static let remoteError = ExitStatus(rawValue: 8)
  /// 9: the advertising data does not fit in an advertisement.
  public static let advertisementTooLarge = ExitStatus(rawValue: 9)
  /// 10: the device has no such service, characteristic or descriptor.
  public static let notFound = ExitStatus(rawValue: 10)
  /// 11: the characteristic does not allow the operation (not readable, not writable, does not
  /// notify or indicate).
  public static let notSupported = ExitStatus(rawValue: 11)
  /// 12: a received message cannot be vouched for: a plain peer's chunks whose order is not
  /// guaranteed on this link, or sequenced frames that fail their length or CRC-32 check.
  /// Nothing was printed.
  public static let unverified = ExitStatus(rawValue: 12)
  /// 13: standard output could not be written (a closed pipe, a full disk); the command
  /// stopped and cleaned up. Also: it was read so slowly that values were dropped at a bound
  /// (`notify`, `explore --listen`, `serve`'s writes), said in the last line.
  public static let outputFailed = ExitStatus(rawValue: 13)
  /// 14: the MQTT broker named by `--mqtt` could not be reached at the start, or refused the
  /// connection (bad credentials, a client ID it rejects).
  public static let brokerUnavailable = ExitStatus(rawValue: 14)
  /// 15: a passive scan (`--passive`) was asked for, but bluetoothd offers no advertisement
  /// monitor (`AdvertisementMonitorManager1` needs `bluetoothd --experimental` in BlueZ 5.66)
  /// or did not activate it. Nothing was scanned: there is no fall-back to active scanning.
  public static let passiveScanUnavailable = ExitStatus(rawValue: 15)
  /// 129 (128 + SIGHUP): stopped because its terminal or login session went away.
  public static let hangUp = ExitStatus(rawValue: 129)
  /// 130 (128 + SIGINT): stopped by Ctrl-C.
  public static let interrupted = ExitStatus(rawValue: 130)
  /// 143 (128 + SIGTERM): stopped by SIGTERM.
  public static let terminated = ExitStatus(rawValue: 143)

  /// Every status with its meaning, in numeric order, for help and documentation.
  public static let documented: [(status: ExitStatus, meaning: String)] = [
    (.success, "Success."),
    (.failure, "Failure without a more specific status."),
    (.usage, "Bad command line: unknown command or option, missing or malformed value."),
    (.adapterNotFound, "The Bluetooth adapter was not found."),
    (.bluetoothUnavailable, "bluetoothd is not running or not on the system bus."),
    (
      .permissionDenied,
      "Permission denied by the system bus or BlueZ, or values that need pairing (explore).",
    ),
    (.timedOut, "Nothing found in time, or an operation timed out."),
    (.disconnected, "The peer disconnected or a transfer was cut short."),
    (.remoteError, "BlueZ or D-Bus answered with an error."),
    (.advertisementTooLarge, "The advertising data does not fit."),
    (.notFound, "No such service, characteristic or descriptor on the device."),
    (.notSupported, "The characteristic does not allow the operation (read, write, notify)."),
    (
      .unverified,
      "A received message cannot be vouched for (order not guaranteed, or a failed check).",
    ),
    (
      .outputFailed,
      "Standard output could not be written (closed pipe, full disk), or was read so slowly "
        + "that values were dropped.",
    ),
    (.brokerUnavailable, "The MQTT broker is unreachable or refused the connection."),
    (
      .passiveScanUnavailable,
      "No passive scanning: bluetoothd lacks AdvertisementMonitorManager1 (--experimental).",
    ),
    (.hangUp, "Hung up (SIGHUP: the terminal or session went away)."),
    (.interrupted, "Interrupted (SIGINT, Ctrl-C)."),
    (.terminated, "Terminated (SIGTERM)."),
  ]

  /// The table as a help section, `EXIT STATUS:`.
  public static var helpSection: HelpSection {
    HelpSection(
      title: "EXIT STATUS", rows: documented.map { (String($0.status.rawValue), $0.meaning) })
  }

  public var description: String { String(rawValue) }
}
