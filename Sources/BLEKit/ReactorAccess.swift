// The process's one reactor (the DBus module's, which waits on the bus connections too), named
// here for BLEKit's files and for the blekit command, which reach it through BLEKit.
import DBus

package typealias Reactor = DBus.Reactor
package typealias ReactorWait = DBus.ReactorWait
