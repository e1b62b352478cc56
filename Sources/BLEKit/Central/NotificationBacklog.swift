// NotificationBacklog: how far the reader of an AcquireNotify socket fell behind, and whether
// that was far enough for bluetoothd to have dropped a value it could not write.
import Bluetooth

/// Measures the unread values of one AcquireNotify socket, in the kernel memory they hold.
///
/// bluetoothd writes each notification to its end of a non-blocking `SOCK_SEQPACKET` pair and
/// drops the value when the write fails with EAGAIN. For a Unix socket pair the values waiting
/// in the reader's queue are charged to the *sender's* send buffer (`SO_SNDBUF`; bluetoothd
/// leaves it at `net.core.wmem_default`, 212,992 bytes on Debian), each at its `truesize`: 768
/// bytes for a value of up to 64 bytes, 1,280 for one of 200 to 512 (Linux 6.1 and 6.18,
/// x86-64). So at MTU 23 about 278 unread values fill it, at MTU 247 or 517 about 167.
///
/// The reader cannot see that buffer, but it can see its own queue: `FIONREAD` on a
/// `SOCK_SEQPACKET` Unix socket answers the bytes of *every* queued value. The meter takes a
/// snapshot of that figure, counts the values it reads until they add up to it (the queue is
/// first in, first out, so those were the values queued at the snapshot), charges each with
/// the kernel's size for it, and takes the next snapshot as soon as one is complete. When
/// bluetoothd dropped a value, its send buffer was full at that moment; the values then queued
/// were the unread rest of one snapshot and the arrivals after it, which all belong to the
/// next snapshot, so one of the two holds at least half the buffer. The meter therefore
/// suspects a drop when a snapshot reaches ``suspicionFraction`` (two fifths, leaving room for
/// a kernel whose sizes are a quarter above the model) of the send buffer. It may suspect a
/// drop that did not happen (a reader briefly ~100 values behind); it does not miss one that did,
/// as long as bluetoothd's send buffer is the system default. One exception: an empty value
/// holds kernel memory (768 bytes) but adds nothing to `FIONREAD`, so empty values queued
/// behind a snapshot's last byte are charged one by one, not together: a flood of empty
/// notifications alone could fill the buffer unseen.
struct NotificationBacklog: Sendable {
  /// bluetoothd's send buffer for the socket: `net.core.wmem_default` (read once).
  let senderBuffer: Int
  /// Bytes of the current snapshot not yet read; `nil` when no snapshot is open.
  private var bytesLeft: Int?
  /// The kernel memory of the values read so far from the current snapshot.
  private var charge = 0
  /// The largest complete snapshot so far, in kernel memory.
  private(set) var peak = 0

  /// The share of the sender's buffer one snapshot may reach before a drop is suspected.
  static let suspicionFraction = (numerator: 2, denominator: 5)

  init(senderBuffer: Int = NotificationBacklog.systemSenderBuffer) {
    self.senderBuffer = senderBuffer
  }

  /// The kernel memory one snapshot may hold before a drop is suspected.
  var limit: Int {
    senderBuffer * Self.suspicionFraction.numerator / Self.suspicionFraction.denominator
  }

  /// Whether some snapshot reached ``limit``.
  var suspected: Bool { peak >= limit }

  /// Whether the next read needs a snapshot taken first.
  var needsSnapshot: Bool { bytesLeft == nil }

  /// Opens a snapshot of `queuedBytes` (FIONREAD before the next read). Zero opens none: the
  /// queue is empty, and a value read next arrived after it.
  mutating func snapshot(queuedBytes: Int) {
    bytesLeft = queuedBytes > 0 ? queuedBytes : nil
    charge = 0
  }

  /// Counts one value read (of `length` bytes).
  mutating func record(valueLength length: Int) {
    guard let left = bytesLeft else {
      // Not in the snapshot (it arrived after an empty one): a snapshot of its own.
      peak = max(peak, Self.kernelSize(ofValue: length))
      return
    }
    charge += Self.kernelSize(ofValue: length)
    if left - length <= 0 { closeSnapshot() } else { bytesLeft = left - length }
  }

  /// The socket is empty (EAGAIN or its end): every value of the open snapshot was read.
  mutating func drained() {
    if bytesLeft != nil { closeSnapshot() }
  }

  private mutating func closeSnapshot() {
    peak = max(peak, charge)
    bytesLeft = nil
    charge = 0
  }

  /// The `truesize` Linux gives a Unix datagram of `length` bytes: its data and the 320-byte
  /// `skb_shared_info`, each rounded up to 64 bytes, in the smallest kmalloc size that holds
  /// them, plus the 256 bytes of the `sk_buff` itself.
  static func kernelSize(ofValue length: Int) -> Int {
    let data = (length + 63) / 64 * 64 + 320
    let slab: Int
    switch data {
    case ...96: slab = 96
    case ...128: slab = 128
    case ...192: slab = 192
    default:
      // The next power of two from 256 up.
      slab = 1 << (Int.bitWidth - (data - 1).leadingZeroBitCount)
    }
    return slab + 256
  }

  /// `net.core.wmem_default`, or Linux's usual 212,992 when it cannot be read.
  static let systemSenderBuffer =
    SmallFile.positiveNumber("/proc/sys/net/core/wmem_default") ?? 212_992
}
