// Every kind of command-line mistake, with the exact message a user sees.

import ArgumentParsing
import Testing

@Suite struct UsageErrorTests {
  @Test func unknownLongOptionSuggestsTheClosest() {
    let error = usageError { () throws(UsageError) in try parseScan(["--servce", "180d"]) }
    #expect(error?.kind == .unknownOption("--servce"))
    #expect(error?.message == "unknown option '--servce'; did you mean '--service'?")
  }

  @Test func unknownOptionWithoutCloseMatch() {
    let error = usageError { () throws(UsageError) in try parseScan(["--frobnicate=3"]) }
    #expect(error?.message == "unknown option '--frobnicate'")
  }

  @Test func unknownShortOption() {
    let error = usageError { () throws(UsageError) in try parseScan(["-dx"]) }
    #expect(error?.message == "unknown option '-x'")
  }

  @Test func missingValueAtTheEnd() {
    let error = usageError { () throws(UsageError) in try parseScan(["--min-rssi"]) }
    #expect(error?.message == "missing value for option '--min-rssi'")
  }

  @Test func missingValueBeforeAnotherOption() {
    let error = usageError { () throws(UsageError) in try parseScan(["--name", "--json"]) }
    #expect(
      error?.message
        == "missing value for option '--name' (for a value that starts with '-', write "
        + "--name=VALUE)")
  }

  @Test func missingValueForShortOption() {
    let error = usageError { () throws(UsageError) in try parseScan(["-t"]) }
    #expect(error?.message == "missing value for option '-t'")
  }

  @Test func flagWithValue() {
    let error = usageError { () throws(UsageError) in try parseScan(["--json=yes"]) }
    #expect(error?.message == "option '--json' does not take a value")
  }

  @Test func malformedInteger() {
    let error = usageError { () throws(UsageError) in try parseScan(["--min-rssi", "loud"]) }
    #expect(
      error?.kind
        == .invalidValue(argument: "'--min-rssi'", value: "loud", reason: "expected an integer"))
    #expect(error?.message == "invalid value 'loud' for '--min-rssi': expected an integer")
  }

  @Test func malformedDuration() {
    let error = usageError { () throws(UsageError) in try parseScan(["-t", "soon"]) }
    #expect(
      error?.message
        == "invalid value 'soon' for '--timeout': expected a duration such as 10, 1.5s, "
        + "500ms or 2m")
  }

  @Test func malformedEnum() {
    let error = usageError { () throws(UsageError) in try parseScan(["--power", "maybe"]) }
    #expect(error?.message == "invalid value 'maybe' for '--power': expected one of: on, off")
  }

  @Test func malformedPositional() {
    struct Counted: ArgumentList {
      let count = Argument<UInt8>("COUNT", help: "How many.")
    }
    let error = usageError { () throws(UsageError) in
      try ArgumentParser(specs: Counted.specs).parse(["300"])
    }
    #expect(
      error?.message
        == "invalid value '300' for COUNT: expected a non-negative integer from 0 to 255")
  }

  @Test func missingPositional() {
    let error = usageError { () throws(UsageError) in try WriteFixture.parse(["AA:BB"]) }
    #expect(error?.message == "missing argument CHAR-UUID")
  }

  @Test func unexpectedPositional() {
    let error = usageError { () throws(UsageError) in
      try WriteFixture.parse(["AA:BB", "2a00", "01", "02"])
    }
    #expect(error?.message == "unexpected argument '02'")
    let scanError = usageError { () throws(UsageError) in try parseScan(["-50"]) }
    #expect(scanError?.message == "unexpected argument '-50'")
  }

  @Test func duplicateOption() {
    let error = usageError { () throws(UsageError) in
      try parseScan(["--timeout", "1", "-t", "2"])
    }
    #expect(error?.message == "option '--timeout' given more than once")
  }

  @Test func commandValidation() {
    let rssi = usageError { () throws(UsageError) in try parseScan(["--min-rssi", "-200"]) }
    #expect(rssi?.message == "--min-rssi must be between -127 and 20 dBm")
    let both = usageError { () throws(UsageError) in
      try WriteFixture.parse(["AA:BB", "2a00", "01", "--text", "x"])
    }
    #expect(both?.message == "give either HEX or --text")
  }

  @Test func hintNamesTheCommand() {
    #expect(
      UsageError(.missingArgument("X"), commandPath: ["blekit", "read"]).hint
        == "Try 'blekit read --help'.")
    #expect(UsageError(.missingArgument("X")).hint == nil)
  }
}
