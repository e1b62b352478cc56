// Value parsing for integers, doubles, durations and enums.

import ArgumentParsing
import Testing

@Suite struct StandardArgumentValuesTests {
  @Test(arguments: [
    ("42", 42), ("-50", -50), ("+7", 7), ("0x1F", 31), ("0XfF", 255), ("-0x10", -16),
  ])
  func integers(word: String, value: Int) throws {
    #expect(try Int(argument: word) == value)
  }

  @Test(arguments: ["", "-", "0x", "1.5", "12a", "ten", " 1", "--1", "0x-1"])
  func malformedIntegers(word: String) {
    #expect(throws: ArgumentValueError("expected an integer")) { try Int(argument: word) }
  }

  @Test func ranges() throws {
    #expect(try UInt16(argument: "0xFFFF") == 0xFFFF)
    #expect(try Int8(argument: "-128") == -128)
    #expect(throws: ArgumentValueError("expected an integer from -128 to 127")) {
      try Int8(argument: "128")
    }
    #expect(throws: ArgumentValueError("expected a non-negative integer from 0 to 65535")) {
      try UInt16(argument: "-1")
    }
    #expect(throws: ArgumentValueError("an integer out of range")) {
      try Int(argument: "99999999999999999999")
    }
  }

  @Test func doubles() throws {
    #expect(try Double(argument: "-2.5") == -2.5)
    #expect(try Double(argument: "1e3") == 1000)
    for word in ["nan", "inf", "", "x"] {
      #expect(throws: ArgumentValueError("expected a number")) { try Double(argument: word) }
    }
  }

  @Test(arguments: [
    ("10", Duration.seconds(10)), ("1.5s", .milliseconds(1500)), ("500ms", .milliseconds(500)),
    ("2m", .seconds(120)), ("2min", .seconds(120)), ("1h", .seconds(3600)), ("0", .zero),
    (".5", .milliseconds(500)),
  ])
  func durations(word: String, value: Duration) throws {
    #expect(try Duration(argument: word) == value)
  }

  @Test(arguments: ["", "s", "-1", "-1s", "10x", "1.5.s", "ms10", "inf", "nan", "2e10"])
  func malformedDurations(word: String) {
    #expect(throws: ArgumentValueError("expected a duration such as 10, 1.5s, 500ms or 2m")) {
      try Duration(argument: word)
    }
  }

  @Test func durationDescriptions() {
    #expect(Duration.seconds(10).argumentDescription == "10s")
    #expect(Duration.milliseconds(1500).argumentDescription == "1500ms")
    #expect(Duration.milliseconds(250).argumentDescription == "250ms")
  }

  @Test func enums() throws {
    #expect(try Power(argument: "on") == .on)
    #expect(Power.argumentChoices == ["on", "off"])
    #expect(Power.off.argumentDescription == "off")
    #expect(throws: ArgumentValueError("expected one of: on, off")) { try Power(argument: "ON") }
  }

  @Test func stringsAreTakenVerbatim() throws {
    #expect(try String(argument: " spaced -x ") == " spaced -x ")
  }
}
