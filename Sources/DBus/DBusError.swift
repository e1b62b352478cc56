// The one error type of the DBus module: an open code, the D-Bus error name, and a message.

/// An error from the D-Bus layer: a remote error reply, a timeout, a refused argument, ...
public struct DBusError: Error, Sendable, CustomStringConvertible, Equatable {
  /// What kind of failure this is. Open for extension; compare with the static constants.
  public struct Code: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    public var rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }
    public var description: String { rawValue }

    /// The peer answered with an error reply; `name` holds the D-Bus error name.
    public static let remote = Code(rawValue: "remote")
    /// No reply arrived within the call's timeout.
    public static let timeout = Code(rawValue: "timeout")
    /// The connection is closed or was lost.
    public static let disconnected = Code(rawValue: "disconnected")
    /// An argument (name, value, signature) was refused before anything was sent.
    public static let invalidArgument = Code(rawValue: "invalidArgument")
    /// A reply arrived but its shape is not what was expected.
    public static let unexpectedReply = Code(rawValue: "unexpectedReply")
    /// libdbus could not allocate memory.
    public static let noMemory = Code(rawValue: "noMemory")
    /// The calling task was cancelled.
    public static let cancelled = Code(rawValue: "cancelled")
    /// Opening or registering the connection failed.
    public static let connectionFailed = Code(rawValue: "connectionFailed")
    /// The peer went away without replying (`org.freedesktop.DBus.Error.NoReply` from the bus).
    public static let noReply = Code(rawValue: "noReply")
  }

  /// The kind of failure.
  public var code: Code
  /// The D-Bus error name, e.g. `org.bluez.Error.InProgress` (set for `.remote` and `.noReply`).
  public var name: String?
  /// A human-readable explanation.
  public var message: String

  /// Creates an error.
  public init(code: Code, name: String? = nil, message: String) {
    self.code = code
    self.name = name
    self.message = message
  }

  /// An error reply with the given D-Bus error name, for exported method handlers to throw.
  public static func remote(name: String, message: String) -> DBusError {
    DBusError(code: .remote, name: name, message: message)
  }

  /// One line: `org.bluez.Error.Failed: Operation failed`, or just the message if unnamed.
  public var description: String {
    if let name { return message.isEmpty ? name : "\(name): \(message)" }
    return message
  }

  static let noMemoryError = DBusError(code: .noMemory, message: "libdbus ran out of memory")
  static func disconnectedError(_ what: String = "the connection is closed") -> DBusError {
    DBusError(code: .disconnected, message: what)
  }
  static func invalid(_ message: String) -> DBusError {
    DBusError(code: .invalidArgument, message: message)
  }
}
