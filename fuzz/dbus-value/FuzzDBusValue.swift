// libFuzzer target: the D-Bus value decoder. The input becomes a marshalled message (a
// METHOD_RETURN header around an input-chosen signature and body), libdbus validates it with
// dbus_message_demarshal as it does every incoming message, and the decoder (MessageReader
// over WireBody, reading the message's bytes) turns the body into DBusValues: it must read
// whatever libdbus accepted (unix fds aside, a variant's included: a demarshalled message
// carries none), one value per type of the signature, each of its type. Values that decode
// are encoded again and must decode to the same values.
// Inputs starting with 'l' or 'B' are also tried as whole raw messages. Built by scripts/fuzz.
import CDBus

#if canImport(Glibc)
  import Glibc
#endif

/// FUZZ_VERBOSE=1 prints what each input decodes to (to check that seeds reach the decoder).
private let verbose = getenv("FUZZ_VERBOSE") != nil

/// The type codes a signature is drawn from (any byte maps to one of them).
private let signatureAlphabet = Array("ybnqiuxtdsogvah(){}".utf8)

@_cdecl("LLVMFuzzerTestOneInput")
public func fuzzDBusValue(_ start: UnsafePointer<UInt8>, _ count: Int) -> CInt {
  var input = FuzzInput(start, count)
  if let first = input.bytes.first, first == UInt8(ascii: "l") || first == UInt8(ascii: "B") {
    decodeMarshalled(input.bytes)
  }
  let signatureLength = Int(input.byte()) % 32
  let signature = input.take(signatureLength).map {
    signatureAlphabet[Int($0) % signatureAlphabet.count]
  }
  decodeMarshalled(methodReturn(signature: signature, body: input.rest()))
  return 0
}

/// A little-endian METHOD_RETURN message: header fields REPLY_SERIAL and SIGNATURE, then body.
private func methodReturn(signature: [UInt8], body: [UInt8]) -> [UInt8] {
  var message: [UInt8] = [UInt8(ascii: "l"), 2, 0, 1]
  message += le32(UInt32(body.count)) + le32(1)
  var fields: [UInt8] = [5, 1, UInt8(ascii: "u"), 0] + le32(1)  // REPLY_SERIAL = 1
  if !signature.isEmpty {
    fields += [8, 1, UInt8(ascii: "g"), 0, UInt8(signature.count)] + signature + [0]
  }
  message += le32(UInt32(fields.count)) + fields
  while message.count % 8 != 0 { message.append(0) }
  return message + body
}

private func le32(_ value: UInt32) -> [UInt8] {
  (0..<4).map { UInt8(truncatingIfNeeded: value >> (8 * $0)) }
}

/// Demarshals `bytes` (libdbus refuses anything invalid) and decodes the body.
private func decodeMarshalled(_ bytes: [UInt8]) {
  var error = CDBus.DBusError()
  dbus_error_init(&error)
  defer { dbus_error_free(&error) }
  let message = bytes.withUnsafeBufferPointer { buffer in
    buffer.withMemoryRebound(to: CChar.self) {
      dbus_message_demarshal($0.baseAddress, Int32($0.count), &error)
    }
  }
  guard let message else { return }
  defer { dbus_message_unref(message) }
  let signature = dbus_message_get_signature(message).map { String(cString: $0) } ?? ""
  let decoded = Result { () throws(DBusError) in try MessageReader.arguments(of: message) }
  guard case .success(let values) = decoded else {
    // The one refusal allowed: a unix fd (at the top level or inside a variant) in a message
    // that carries none, as every demarshalled message is.
    if case .failure(let error) = decoded {
      fuzzCheck(
        error.message == "message carried an invalid fd",
        "the decoder refused what libdbus accepted: \(decoded)")
    }
    return
  }
  if verbose { print("decoded:", values) }
  let types = (try? DBusType.parseList(signature)) ?? []
  fuzzCheck(types.count == values.count, "\(values.count) values for signature \(signature)")
  for (value, type) in zip(values, types) {
    fuzzCheck(
      value.signature == type.signature,
      "a value of \(value.signature) decoded for \(type.signature)")
  }
  for value in values {
    _ = value.signature
    _ = value.stringVariantDictionary
    _ = value.bytesValue
  }
  // Encode the values into a fresh message and decode them again: the same values (compared
  // by their descriptions, so that a NaN equals itself).
  guard let copy = dbus_message_new(DBUS_MESSAGE_TYPE_METHOD_RETURN) else { return }
  defer { dbus_message_unref(copy) }
  dbus_message_set_reply_serial(copy, 1)
  var iter = DBusMessageIter()
  dbus_message_iter_init_append(copy, &iter)
  for value in values {
    do {
      let type = try DBusType.parseSingle(value.signature.rawValue)
      try MessageEncoder.encode(value, as: type, into: &iter, depth: 0)
    } catch {
      fuzzCheck(false, "a decoded value could not be encoded again: \(error)")
    }
  }
  let again = try? MessageReader.arguments(of: copy)
  fuzzCheck(
    String(reflecting: again ?? []) == String(reflecting: values),
    "values changed after an encode/decode round trip")
}
