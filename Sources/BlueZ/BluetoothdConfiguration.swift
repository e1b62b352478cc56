// BluetoothdConfiguration: the settings the running bluetoothd was started with, read from
// the main.conf it uses (its `-f`/`--configfile`, else the packaged default).
import Bluetooth
import DBus

/// The parts of the running bluetoothd's configuration that change what a client sees.
///
/// bluetoothd exports none of its settings on D-Bus, so they are read from its configuration
/// file: the one given on its command line (`bluetoothd -f /run/bt/main.conf`, read from
/// `/proc/PID/cmdline` with the pid from the bus), else `/etc/bluetooth/main.conf`. What a
/// missing or invalid setting means depends on the release (``BluetoothdFeatures``).
public struct BluetoothdConfiguration: Sendable, Hashable {
  /// bluetoothd 5.66's default for `[GATT] Channels`: one ATT bearer plus two EATT bearers.
  /// From 5.67 the default is 1 (``BluetoothdFeatures/defaultGATTChannels``).
  public static let defaultGATTChannels = 3
  /// The path bluetoothd reads when started without `-f` (Debian's `CONFIGDIR`).
  public static let defaultPath = "/etc/bluetooth/main.conf"

  /// ATT bearers bluetoothd opens or accepts per connection (`[GATT] Channels`, 1...5).
  /// Above 1, EATT is on: notifications can travel on several bearers.
  public var gattChannels: Int
  /// Where `gattChannels` comes from, for messages: `Channels = 1 in /etc/bluetooth/main.conf`
  /// or `bluetoothd's default (no Channels in /etc/bluetooth/main.conf)`.
  public var source: String

  public init(gattChannels: Int, source: String) {
    self.gattChannels = gattChannels
    self.source = source
  }

  /// Reads the configuration of the bluetoothd that owns `org.bluez` on `connection`, with
  /// the defaults of its release (``BluetoothdFeatures/read(on:)``).
  ///
  /// Returns `nil` when it cannot be known: nobody owns `org.bluez`, or its configuration
  /// file cannot be read (another mount namespace, no permission).
  public static func read(on connection: DBusConnection) async -> BluetoothdConfiguration? {
    guard let pid = try? await connection.processID(of: BlueZ.service) else { return nil }
    let arguments = SmallFile.read("/proc/\(pid)/cmdline").map(splitCommandLine) ?? []
    let path = configurationPath(arguments: arguments)
    guard let text = SmallFile.read(path).map({ String(decoding: $0, as: UTF8.self) }) else {
      return nil
    }
    let features = await BluetoothdFeatures.read(on: connection)
    return parse(mainConf: text, path: path, features: features)
  }

  /// The file bluetoothd reads, from its arguments (without the program name or with it):
  /// `-f FILE`, `-fFILE`, `--configfile FILE` or `--configfile=FILE`; the last one wins, as
  /// with getopt. Without any, ``defaultPath``.
  public static func configurationPath(arguments: [String]) -> String {
    var path = defaultPath
    var index = 0
    while index < arguments.count {
      let argument = arguments[index]
      if argument == "-f" || argument == "--configfile" {
        if index + 1 < arguments.count { path = arguments[index + 1] }
        index += 2
        continue
      }
      if argument.hasPrefix("--configfile=") {
        path = String(argument.dropFirst("--configfile=".count))
      } else if argument.hasPrefix("-f"), argument.count > 2, !argument.hasPrefix("--") {
        path = String(argument.dropFirst(2))
      }
      index += 1
    }
    return path
  }

  /// Reads `[GATT] Channels` from main.conf text as the release in `features` does: a key
  /// file (`#` comments, `key = value`); 5.66 clamps an integer to 1...5, 5.67 and later keep
  /// their default for a value outside 1...6; absent or not an integer, the release's default
  /// (3 up to 5.66, 1 from 5.67). Without a version, 5.66's rules.
  public static func parse(
    mainConf text: String, path: String,
    features: BluetoothdFeatures = BluetoothdFeatures(version: nil)
  ) -> BluetoothdConfiguration {
    var group = ""
    var channels: Int?
    var invalid: String?
    for rawLine in text.split(omittingEmptySubsequences: false, whereSeparator: \.isNewline) {
      let line = rawLine.trimmingASCIIWhitespace()
      if line.isEmpty || line.hasPrefix("#") { continue }
      if line.hasPrefix("[") {
        if let end = line.firstIndex(of: "]") {
          group = String(line[line.index(after: line.startIndex)..<end])
        }
        continue
      }
      guard group == "GATT", let equals = line.firstIndex(of: "=") else { continue }
      let key = line[..<equals].trimmingASCIIWhitespace()
      guard key == "Channels" else { continue }
      let value = line[line.index(after: equals)...].trimmingASCIIWhitespace()
      if let number = Int(value) {
        let allowed = 1...features.maximumGATTChannels
        if allowed.contains(number) {
          channels = number
          invalid = nil
        } else if features.clampsGATTChannels {
          channels = min(max(number, allowed.lowerBound), allowed.upperBound)
          invalid = nil
        } else {
          channels = nil
          invalid = "Channels = \(number) is out of \(allowed.lowerBound)...\(allowed.upperBound)"
        }
      } else {
        channels = nil
        invalid = "Channels = \(value) is not a number"
      }
    }
    if let channels {
      return BluetoothdConfiguration(
        gattChannels: channels, source: "Channels = \(channels) in \(path)")
    }
    let why = invalid ?? "no Channels"
    let whose = features.version.map { "bluetoothd \($0)'s default" } ?? "bluetoothd's default"
    return BluetoothdConfiguration(
      gattChannels: features.defaultGATTChannels, source: "\(whose) (\(why) in \(path))")
  }

  /// `/proc/PID/cmdline`'s NUL-separated arguments.
  static func splitCommandLine(_ bytes: [UInt8]) -> [String] {
    bytes.split(separator: 0, omittingEmptySubsequences: false).map {
      String(decoding: $0, as: UTF8.self)
    }.filter { !$0.isEmpty }
  }
}

extension StringProtocol where SubSequence == Substring {
  /// The text without leading and trailing spaces and tabs.
  fileprivate func trimmingASCIIWhitespace() -> Substring {
    var slice = self[...]
    while let first = slice.first, first == " " || first == "\t" { slice = slice.dropFirst() }
    while let last = slice.last, last == " " || last == "\t" || last == "\r" {
      slice = slice.dropLast()
    }
    return Substring(slice)
  }
}
