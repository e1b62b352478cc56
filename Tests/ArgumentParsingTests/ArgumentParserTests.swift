// Option forms, repeatable options, negative numbers, `--`, positionals.

import ArgumentParsing
import Testing

@Suite struct ArgumentParserTests {
  @Test func defaultsWhenNothingIsGiven() throws {
    let scan = try parseScan([])
    #expect(scan.services == [])
    #expect(scan.minRSSI == nil)
    #expect(scan.name == nil)
    #expect(!scan.json && !scan.duplicates)
    #expect(scan.timeout == .seconds(10))
    #expect(scan.power == nil)
  }

  @Test func separateAndInlineValues() throws {
    let separate = try parseScan(["--name", "Polar H10", "--timeout", "500ms"])
    let inline = try parseScan(["--name=Polar H10", "--timeout=500ms"])
    #expect(separate.name == "Polar H10" && inline.name == "Polar H10")
    #expect(separate.timeout == .milliseconds(500) && inline.timeout == .milliseconds(500))
  }

  @Test func inlineValueMayContainEqualsAndBeEmpty() throws {
    #expect(try parseScan(["--name=a=b"]).name == "a=b")
    #expect(try parseScan(["--name="]).name == "")
  }

  /// Found by the arguments fuzz target: a value starting with a combining mark (U+0301
  /// here) joins the `=` before it into one Character, so `--name=\u{301}x` read as an unknown
  /// option `--name=\u{301}x`, and `-s\u{301}x` as an unknown `-s\u{301}`. The parser splits
  /// words at Unicode scalars.
  @Test func valuesMayStartWithACombiningMark() throws {
    #expect(try parseScan(["--name=\u{301}x"]).name == "\u{301}x")
    #expect(try parseScan(["-s\u{301}x"]).services == ["\u{301}x"])
  }

  @Test func repeatableOptionKeepsOrder() throws {
    let scan = try parseScan(["--service", "180d", "--json", "--service=180f", "-s", "fff0"])
    #expect(scan.services == ["180d", "180f", "fff0"])
    #expect(scan.json)
  }

  @Test func negativeNumbersAreValues() throws {
    #expect(try parseScan(["--min-rssi", "-50"]).minRSSI == -50)
    #expect(try parseScan(["--min-rssi=-50"]).minRSSI == -50)
    #expect(try parseScan(["--min-rssi", "-0x10"]).minRSSI == -16)
  }

  @Test func negativeNumberIsAPositional() throws {
    struct Numbers: ArgumentList {
      let values = RepeatedArgument<Double>("N", help: "Numbers.")
    }
    let parsed = try ArgumentParser(specs: Numbers.specs).parse(["-1.5", "2", "-.5"])
    #expect(ParsedArguments<Numbers>(parsed).values == [-1.5, 2, -0.5])
  }

  @Test func shortNamesAndClusters() throws {
    let scan = try parseScan(["-dj", "-t", "2m", "-s180d", "-js", "fff0"])
    #expect(scan.duplicates && scan.json)
    #expect(scan.timeout == .seconds(120))
    #expect(scan.services == ["180d", "fff0"])
  }

  @Test func doubleDashEndsOptions() throws {
    let write = try WriteFixture.parse(["--without-response", "--", "AA:BB", "--text", "-x"])
    #expect(write.address == "AA:BB")
    #expect(write.characteristic == "--text")
    #expect(write.hex == "-x")
    #expect(write.text == nil)
    #expect(write.withoutResponse)
  }

  @Test func dashAloneIsAValue() throws {
    #expect(try parseScan(["--name", "-"]).name == "-")
  }

  @Test func positionalsAndOptionsInterleave() throws {
    let write = try WriteFixture.parse(["AA:BB", "--text", "hi", "2a00", "--without-response"])
    #expect(write.address == "AA:BB")
    #expect(write.characteristic == "2a00")
    #expect(write.hex == nil)
    #expect(write.text == "hi")
  }

  @Test func optionalPositional() throws {
    let write = try WriteFixture.parse(["AA:BB", "2a00", "0102ff"])
    #expect(write.hex == "0102ff")
  }

  @Test func enumValues() throws {
    #expect(try parseScan(["--power", "off"]).power == .off)
  }

  @Test func wasGivenTellsDefaultsFromTypedValues() throws {
    let words = ["--timeout", "10s", "AA"]
    struct Declared: ArgumentList {
      let timeout = DefaultedOption<Duration>(
        "--timeout", value: "D", default: .seconds(10), help: "")
      let name = Option<String>("--name", value: "N", help: "")
      let rest = RepeatedArgument<String>("REST", help: "")
    }
    let typed = ParsedArguments<Declared>(try ArgumentParser(specs: Declared.specs).parse(words))
    let empty = ParsedArguments<Declared>(try ArgumentParser(specs: Declared.specs).parse([]))
    #expect(typed.timeout == empty.timeout)
    #expect(typed.wasGiven(\.timeout) && !empty.wasGiven(\.timeout))
    #expect(!typed.wasGiven(\.name))
    #expect(typed.wasGiven(\.rest) && !empty.wasGiven(\.rest))
  }

  @Test func repeatedFlagIsHarmless() throws {
    #expect(try parseScan(["--json", "--json"]).json)
  }
}
