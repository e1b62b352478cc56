// The list of blekit's commands: adding a command is one file plus one line here.

import ArgumentParsing

/// Every top-level command, in the order `blekit --help` lists them.
enum CommandRegistry {
  static let commands: [any ParsableCommand.Type] = [
    HelpCommand.self,
    AdaptersCommand.self,
    AdvertiseCommand.self,
    CloneCommand.self,
    ExploreCommand.self,
    FleetCommand.self,
    L2CAPCommand.self,
    MonitorCommand.self,
    NotifyCommand.self,
    PairCommand.self,
    ReadCommand.self,
    ReceiveCommand.self,
    ScanCommand.self,
    ServeCommand.self,
    TrustCommand.self,
    UnpairCommand.self,
    WriteCommand.self,
  ]
}
