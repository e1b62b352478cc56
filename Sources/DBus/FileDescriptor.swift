// An owned unix file descriptor carried by D-Bus messages (type `h`).
import Synchronization

#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#elseif canImport(Darwin)
  import Darwin
#endif

/// An owned unix fd: received fds are owned by this object and closed when the last reference
/// goes, unless `take()` hands ownership to the caller.
///
/// Equality is identity: two `FileDescriptor` objects are equal only if they are the same object.
public final class FileDescriptor: Hashable, Sendable, CustomStringConvertible {
  private let fd: Mutex<Int32?>

  /// Takes ownership of `fd`; it is closed when this object goes away unless taken.
  public init(owning fd: Int32) {
    self.fd = Mutex(fd)
  }

  deinit {
    if let raw = fd.withLock({ $0 }) { Syscall.close(raw) }
  }

  /// The descriptor number, or -1 once it has been taken.
  public var rawValue: Int32 { fd.withLock { $0 ?? -1 } }

  /// Hands ownership to the caller: returns the raw fd (the caller must close it), or nil if
  /// it was already taken.
  public func take() -> Int32? {
    fd.withLock { value in
      defer { value = nil }
      return value
    }
  }

  /// A new, independently owned descriptor for the same open file (`dup`).
  public func duplicate() throws(DBusError) -> FileDescriptor {
    let raw = rawValue
    guard raw >= 0 else { throw DBusError.invalid("file descriptor was already taken") }
    let copy = Syscall.dup(raw)
    guard copy >= 0 else {
      throw DBusError.invalid("dup(\(raw)) failed: errno \(errno)")
    }
    return FileDescriptor(owning: copy)
  }

  public static func == (lhs: FileDescriptor, rhs: FileDescriptor) -> Bool { lhs === rhs }
  public func hash(into hasher: inout Hasher) { hasher.combine(ObjectIdentifier(self)) }
  public var description: String { "fd \(rawValue)" }
}
