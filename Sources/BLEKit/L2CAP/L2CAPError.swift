// L2CAPError: what goes wrong with an L2CAP channel, with the kernel's errno kept.
#if canImport(Glibc)
  import Glibc
#endif

/// An L2CAP channel failure: a code to act on, a one-line message, and the kernel's errno.
public struct L2CAPError: Error, Sendable, Hashable, CustomStringConvertible {
  /// What kind of failure.
  public struct Code: RawRepresentable, Hashable, Sendable {
    public let rawValue: String
    public init(rawValue: String) { self.rawValue = rawValue }

    /// The kernel has no Bluetooth sockets (no `AF_BLUETOOTH`, or no such adapter).
    public static let unavailable = Code(rawValue: "unavailable")
    /// The kernel refused the operation to this process (e.g. a SIG-assigned PSM without
    /// `CAP_NET_BIND_SERVICE`).
    public static let permissionDenied = Code(rawValue: "permissionDenied")
    /// The PSM is taken by another listener on this adapter.
    public static let addressInUse = Code(rawValue: "addressInUse")
    /// Nothing listens on the PSM at the peer (the peer answered "SPSM not supported"), or
    /// the peer refused the channel.
    public static let refused = Code(rawValue: "refused")
    /// The peer requires more security (encryption, authentication) than the link has.
    public static let insufficientSecurity = Code(rawValue: "insufficientSecurity")
    /// Connecting took too long.
    public static let timedOut = Code(rawValue: "timedOut")
    /// The link to the peer was lost (supervision timeout, the local side ended it, ...).
    public static let linkLost = Code(rawValue: "linkLost")
    /// The channel is closed (by this side, or the peer closed it): nothing more can be sent.
    public static let closed = Code(rawValue: "closed")
    /// An SDU larger than the peer accepts (its MTU).
    public static let tooLarge = Code(rawValue: "tooLarge")
    /// Any other system error.
    public static let system = Code(rawValue: "system")
  }

  public var code: Code
  public var message: String
  /// The errno behind it, if any.
  public var errno: Int32?

  public init(_ code: Code, _ message: String, errno: Int32? = nil) {
    self.code = code
    self.message = message
    self.errno = errno
  }

  public var description: String { message }

  /// Maps an errno from `operation` ("connect", "bind", ...) to a code and a message that
  /// names it.
  static func fromErrno(_ number: Int32, _ operation: String) -> L2CAPError {
    let text = String(cString: strerror(number))
    let code: Code
    switch number {
    case EAFNOSUPPORT, EPROTONOSUPPORT, ESOCKTNOSUPPORT, EHOSTUNREACH, ENODEV: code = .unavailable
    case EPERM: code = .permissionDenied
    case EACCES: code = operation == "connect" ? .insufficientSecurity : .permissionDenied
    case EADDRINUSE: code = .addressInUse
    case ECONNREFUSED: code = .refused
    case ETIMEDOUT: code = .timedOut
    case ECONNABORTED, EHOSTDOWN, ENOTCONN, ENETDOWN, ENETRESET: code = .linkLost
    case ECONNRESET, EPIPE, EBADFD: code = .closed
    case EMSGSIZE: code = .tooLarge
    default: code = .system
    }
    return L2CAPError(code, "\(operation): \(text)", errno: number)
  }
}
