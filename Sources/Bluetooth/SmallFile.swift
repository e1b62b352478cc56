// SmallFile: the bytes of a small system file (/proc, /etc) for the modules of this package.
#if canImport(Glibc)
  import Glibc
#elseif canImport(Musl)
  import Musl
#endif

/// Reads small files whole: bluetoothd's command line and configuration, sysctls, and
/// `/proc/net/l2cap`.
package enum SmallFile {
  /// The file's bytes (at most `limit`), or `nil` if it cannot be read.
  package static func read(_ path: String, limit: Int = 1 << 20) -> [UInt8]? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var buffer = [UInt8](repeating: 0, count: 4096)
    while bytes.count < limit {
      let count = buffer.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
      if count < 0 && errno == EINTR { continue }
      guard count >= 0 else { return nil }
      if count == 0 { break }
      bytes.append(contentsOf: buffer[..<count])
    }
    return bytes
  }

  /// The positive number a file such as `/proc/sys/net/core/rmem_default` holds, or `nil`.
  package static func positiveNumber(_ path: String) -> Int? {
    guard let bytes = read(path, limit: 32),
      let value = Int(String(decoding: bytes, as: UTF8.self).filter(\.isNumber)), value > 0
    else { return nil }
    return value
  }
}
