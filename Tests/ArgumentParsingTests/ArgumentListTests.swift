// Declarations become specs in order; unsound declarations are reported.

import ArgumentParsing
import Testing

@Suite struct ArgumentListTests {
  @Test func specsFollowDeclarationOrder() {
    let specs = ScanFixture.Arguments.specs
    #expect(
      specs.map(\.id) == [
        "--service", "--min-rssi", "--name", "--duplicates", "--json", "--timeout", "--power",
      ])
    #expect(specs[0].kind == .option(repeating: true))
    #expect(specs[0].shortName == "s")
    #expect(specs[3].kind == .flag)
    #expect(specs[5].defaultDescription == "10s")
    #expect(specs[6].choices == ["on", "off"])
    #expect(
      WriteFixture.Arguments.specs.map(\.kind) == [
        .positional(.required), .positional(.required), .positional(.optional),
        .option(repeating: false), .flag,
      ])
  }

  @Test func fixturesAreSound() {
    for command in [ScanFixture.self, WriteFixture.self, FailFixture.self]
      as [any ParsableCommand.Type]
    {
      #expect(problems(in: command.argumentSpecs) == [])
    }
  }

  @Test func unsoundDeclarationsAreReported() {
    struct Bad: ArgumentList {
      let a = Flag("--json", help: "")
      let b = Option<Int>("--json", short: "j", value: "N", help: "")
      let c = Flag("-x", short: "j", help: "")
      let d = Flag("--help", short: "h", help: "")
      let e = Flag("--a b", short: "1", help: "")
      let f = RepeatedArgument<String>("REST", help: "")
      let g = Argument<String>("AFTER", help: "")
      let h = Argument<String>("AFTER", help: "")
    }
    #expect(
      problems(in: Bad.specs) == [
        "'--json' is declared twice",
        "malformed option name '-x'",
        "'-j' is declared twice",
        "'--help' is reserved",
        "'-h' is reserved",
        "malformed option name '--a b'",
        "short name '-1' is not a letter",
        "positional AFTER follows a repeating positional",
        "positional AFTER is declared twice",
      ])
  }

  @Test func requiredAfterOptionalIsReported() {
    struct Bad: ArgumentList {
      let a = OptionalArgument<String>("A", help: "")
      let b = Argument<String>("B", help: "")
    }
    #expect(problems(in: Bad.specs) == ["required positional B follows an optional one"])
  }
}
