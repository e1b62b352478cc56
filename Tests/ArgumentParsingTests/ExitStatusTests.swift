// The exit status table, and how errors map to a status and a message.

import ArgumentParsing
import Testing

@Suite struct ExitStatusTests {
  @Test func tableValues() {
    let table: [(ExitStatus, Int32)] = [
      (.success, 0), (.failure, 1), (.usage, 2), (.adapterNotFound, 3),
      (.bluetoothUnavailable, 4), (.permissionDenied, 5), (.timedOut, 6), (.disconnected, 7),
      (.remoteError, 8), (.advertisementTooLarge, 9), (.notFound, 10), (.notSupported, 11),
      (.unverified, 12), (.outputFailed, 13), (.brokerUnavailable, 14),
      (.passiveScanUnavailable, 15),
      (.hangUp, 129), (.interrupted, 130), (.terminated, 143),
    ]
    for (status, value) in table {
      #expect(status.rawValue == value)
    }
    #expect(ExitStatus.documented.map(\.status) == table.map(\.0))
  }

  @Test func statusesAreDistinct() {
    let values = ExitStatus.documented.map(\.status.rawValue)
    #expect(Set(values).count == values.count)
    #expect(values == values.sorted())
  }

  @Test func usageErrorsExitTwoWithHint() {
    let error = UsageError(.unknownOption("--x"), commandPath: ["blekit", "scan"])
    let report = ErrorReport(error)
    #expect(report.status == .usage)
    #expect(
      report.lines(program: "blekit")
        == "blekit: unknown option '--x'\nTry 'blekit scan --help'.\n")
  }

  @Test func cliErrorsKeepTheirStatus() {
    let report = ErrorReport(CLIError(.timedOut, "no device advertising 180d within 10s"))
    #expect(
      report
        == ErrorReport(
          status: .timedOut, message: "no device advertising 180d within 10s", hint: nil))
    #expect(report.lines(program: "blekit") == "blekit: no device advertising 180d within 10s\n")
  }

  @Test func customErrorTypesChooseTheirStatus() {
    struct AdvertisementTooLarge: ExitStatusError {
      var exitStatus: ExitStatus { .advertisementTooLarge }
      var exitMessage: String { "advertisement is 40 bytes; 31 fit" }
    }
    #expect(ErrorReport(AdvertisementTooLarge()).status == .advertisementTooLarge)
    #expect(ErrorReport(AdvertisementTooLarge()).message == "advertisement is 40 bytes; 31 fit")
  }

  @Test func cancellationIsInterruption() {
    #expect(
      ErrorReport(CancellationError())
        == ErrorReport(status: .interrupted, message: "interrupted", hint: nil))
  }

  @Test func otherErrorsAreGeneralFailures() {
    enum Oops: Error { case broken }
    #expect(ErrorReport(Oops.broken) == ErrorReport(status: .failure, message: "broken", hint: nil))
  }

  @Test func messagesStayOnOneLine() {
    let report = ErrorReport(CLIError(.remoteError, "org.bluez.Error.Failed:\nline two\r\n"))
    #expect(report.message == "org.bluez.Error.Failed: line two")
  }
}
