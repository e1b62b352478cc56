// The central-side tests' private bus: TestSupport's PrivateBus.
import TestSupport

/// A private message bus for one test.
typealias ClientTestBus = PrivateBus
