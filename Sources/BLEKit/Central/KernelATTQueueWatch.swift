// KernelATTQueueWatch: how deep the kernel's queues of incoming L2CAP data (bluetoothd's ATT
// sockets among them) got while notifications arrived, read from /proc/net/l2cap.
import Bluetooth

/// Watches the receive queues of the host's L2CAP sockets, where the kernel holds ATT PDUs
/// until bluetoothd reads them.
///
/// ATT has no flow control: when bluetoothd falls behind a peer that floods notifications, its
/// ATT socket's queue fills (`SO_RCVBUF`, which bluetoothd leaves at `net.core.rmem_default`,
/// 212,992 bytes on Debian) and the kernel drops each PDU that no longer fits, before
/// bluetoothd or any client sees it. No client can see that socket's drop counter, but
/// `/proc/net/l2cap` lists every L2CAP socket's queued memory (`Rmem`, the same `truesize`
/// accounting the limit is in: 768 bytes per notification at MTU 23 on Linux 6.1, about 277 of
/// them fill the queue), readable by any user. It names no address, so the watch takes the
/// deepest queue of all of them.
///
/// The watch samples that figure every ``sampleInterval`` values the reader takes (bluetoothd
/// forwards each notification as soon as it reads it, so the samples follow its progress
/// through the queue) and suspects a kernel drop once a sample reaches half the receive
/// buffer. This is a sampled sign, not a proof: a queue that filled and emptied between two
/// samples is missed, and another L2CAP socket's deep queue (an unrelated connection on a busy
/// host) raises a suspicion that was not this stream's. Where `/proc/net/l2cap` cannot be read
/// the watch has no figure.
struct KernelATTQueueWatch: Sendable {
  /// Where the figures are read; `/proc/net/l2cap` outside tests.
  let listing: String
  /// The receive buffer of an ATT socket: `net.core.rmem_default`.
  let receiveBuffer: Int
  /// The deepest queue sampled so far; `nil` until a sample could be read.
  private(set) var peak: Int?
  private var valuesUntilSample = 0

  /// How many values the reader takes between two samples.
  static let sampleInterval = 16
  /// The share of the receive buffer a sample may reach before a drop is suspected.
  static let suspicionFraction = (numerator: 1, denominator: 2)

  init(listing: String = "/proc/net/l2cap", receiveBuffer: Int = Self.systemReceiveBuffer) {
    self.listing = listing
    self.receiveBuffer = receiveBuffer
  }

  /// The queued memory at which a drop is suspected.
  var limit: Int {
    receiveBuffer * Self.suspicionFraction.numerator / Self.suspicionFraction.denominator
  }

  /// Whether some sample reached ``limit``.
  var suspected: Bool { (peak ?? 0) >= limit }

  /// Counts one value read; takes a sample on the first and then every ``sampleInterval``.
  mutating func valueRead() {
    if valuesUntilSample == 0 {
      sample()
      valuesUntilSample = Self.sampleInterval
    }
    valuesUntilSample -= 1
  }

  /// Reads the listing now and keeps its deepest queue if it is the deepest so far.
  mutating func sample() {
    guard let deepest = Self.deepestQueue(in: listing) else { return }
    peak = max(peak ?? 0, deepest)
  }

  /// The largest `Rmem` in the listing at `path`, or `nil` when it cannot be read.
  static func deepestQueue(in path: String) -> Int? {
    SmallFile.read(path).flatMap(deepestQueue(inListing:))
  }

  /// The largest `Rmem` (the third column) of a `/proc/net/l2cap` listing: a header line,
  /// then one line per socket, such as
  /// `0000000065b7012b 2      89088  0      0      10177  0`. `nil` when the text has no
  /// header; 0 when it lists no socket.
  static func deepestQueue(inListing text: [UInt8]) -> Int? {
    var lines = text.split(separator: UInt8(ascii: "\n"), omittingEmptySubsequences: true)[...]
    guard let header = lines.popFirst(),
      header.split(separator: UInt8(ascii: " ")).dropFirst(2).first.map({ Array($0) })
        == Array("Rmem".utf8)
    else { return nil }
    var deepest = 0
    for line in lines {
      let fields = line.split(separator: UInt8(ascii: " "))
      guard fields.count > 2 else { continue }
      var value = 0
      var digits = 0
      for byte in fields[fields.startIndex + 2] {
        guard byte >= UInt8(ascii: "0"), byte <= UInt8(ascii: "9"), digits < 12 else {
          digits = 0
          break
        }
        value = value * 10 + Int(byte - UInt8(ascii: "0"))
        digits += 1
      }
      if digits > 0 { deepest = max(deepest, value) }
    }
    return deepest
  }

  /// `net.core.rmem_default`, or Linux's usual 212,992 when it cannot be read.
  static let systemReceiveBuffer =
    SmallFile.positiveNumber("/proc/sys/net/core/rmem_default") ?? 212_992
}
