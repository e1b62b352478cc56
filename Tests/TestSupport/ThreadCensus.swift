// ThreadCensus: how many of this process's threads are blocked in poll(2) right now, read from
// /proc/self/task/*/syscall, for tests that a descriptor is waited on by the reactor's one
// thread (in epoll_wait) rather than by a thread of its own in poll.
#if canImport(Glibc)
  import Glibc
#endif

/// The threads of this process whose current system call is `poll` (x86_64: 7; aarch64 has no
/// poll, only `ppoll`, 73). A thread's `syscall` file starts with the call's number, or
/// "running" / "-1" when it is in none.
public func threadsBlockedInPoll() -> Int {
  #if arch(x86_64)
    let numbers: Set<Substring> = ["7", "271"]
  #else
    let numbers: Set<Substring> = ["73"]
  #endif
  guard let directory = opendir("/proc/self/task") else { return -1 }
  defer { closedir(directory) }
  var count = 0
  while let entry = readdir(directory) {
    let name = withUnsafeBytes(of: entry.pointee.d_name) { bytes in
      String(decoding: bytes.prefix(while: { $0 != 0 }), as: UTF8.self)
    }
    guard !name.hasPrefix(".") else { continue }
    let fd = open("/proc/self/task/\(name)/syscall", O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { continue }
    var buffer = [UInt8](repeating: 0, count: 32)
    let length = read(fd, &buffer, buffer.count)
    close(fd)
    guard length > 0 else { continue }
    let text = String(decoding: buffer[..<length], as: UTF8.self)
    if let first = text.split(separator: " ").first, numbers.contains(first) { count += 1 }
  }
  return count
}
