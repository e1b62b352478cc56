// Reads D-Bus messages in wire form out of a fuzzer's input, for the targets that feed decoders
// whole messages: either raw messages as a bus carries them (dbus-monitor --binary writes them
// one after another, so a capture is an input as it is) or a body under a header the target
// chooses from a list of shapes, so the fuzzer's mutations land in the body.

/// The header of a message the input only gives the body of.
struct MessageShape {
  /// 1 METHOD_CALL, 2 METHOD_RETURN, 4 SIGNAL.
  var type: UInt8
  var path: String?
  var interface: String?
  var member: String?
  var signature: String

  static func signal(_ interface: String, _ member: String, _ signature: String, path: String)
    -> MessageShape
  {
    MessageShape(type: 4, path: path, interface: interface, member: member, signature: signature)
  }

  static func call(_ interface: String, _ member: String, _ signature: String, path: String)
    -> MessageShape
  {
    MessageShape(type: 1, path: path, interface: interface, member: member, signature: signature)
  }

  static func reply(_ signature: String) -> MessageShape {
    MessageShape(type: 2, path: nil, interface: nil, member: nil, signature: signature)
  }
}

extension FuzzInput {
  /// The next message's bytes, or `nil` at the end of the input.
  ///
  /// At an `l` or `B` (a message's first byte), a raw message: its length comes from its
  /// fixed header (cut short at the end of the input). Otherwise a record: one byte choosing a
  /// shape from `shapes`, two bytes of body length (little-endian), then the body, which goes
  /// after a little-endian header of that shape.
  mutating func nextMessage(shapes: [MessageShape]) -> [UInt8]? {
    guard !isAtEnd else { return nil }
    let first = bytes[offset]
    if first == UInt8(ascii: "l") || first == UInt8(ascii: "B") {
      guard bytes.count - offset >= 16 else { return rest() }
      func u32(_ at: Int) -> Int {
        let b = bytes[(offset + at)..<(offset + at + 4)].map(Int.init)
        return first == UInt8(ascii: "l")
          ? b[0] | b[1] << 8 | b[2] << 16 | b[3] << 24
          : b[3] | b[2] << 8 | b[1] << 16 | b[0] << 24
      }
      let length = ((16 + u32(12) + 7) & ~7) + u32(4)
      return take(length)
    }
    let shape = shapes[Int(byte()) % shapes.count]
    let length = Int(byte()) | Int(byte()) << 8
    return Self.wireMessage(shape, body: take(length))
  }

  /// A little-endian message of `shape` (serial 1) around `body`.
  static func wireMessage(_ shape: MessageShape, body: [UInt8]) -> [UInt8] {
    var fields: [UInt8] = []
    func field(_ code: UInt8, _ type: Character, _ text: String) {
      while fields.count % 8 != 0 { fields.append(0) }
      fields += [code, 1, UInt8(ascii: type.unicodeScalars.first!), 0]
      let utf8 = Array(text.utf8)
      if type == "g" {
        fields.append(UInt8(truncatingIfNeeded: utf8.count))
      } else {
        fields += le32(utf8.count)
      }
      fields += utf8 + [0]
    }
    if let path = shape.path { field(1, "o", path) }
    if let interface = shape.interface { field(2, "s", interface) }
    if let member = shape.member { field(3, "s", member) }
    if shape.type == 2 {
      while fields.count % 8 != 0 { fields.append(0) }
      fields += [5, 1, UInt8(ascii: "u"), 0] + le32(1)  // REPLY_SERIAL
    }
    if !shape.signature.isEmpty { field(8, "g", shape.signature) }
    var message: [UInt8] = [UInt8(ascii: "l"), shape.type, 0, 1]
    message += le32(body.count) + le32(1) + le32(fields.count) + fields
    while message.count % 8 != 0 { message.append(0) }
    return message + body
  }

  private static func le32(_ value: Int) -> [UInt8] {
    (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
  }
}
